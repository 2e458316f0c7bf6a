import Logging
import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop
import ReachabilityPlatform

/// What an evaluation tells beyond the targets: the daemon's own business (the
/// Manager's backend, the path object, when to take the bus name).
@LoopActor
protocol EvaluationEvents: AnyObject {
    func factsReloaded(_ facts: NetworkFacts)
    func pathChanged(_ state: PathState)
    func evaluationFinished()
    func invalidated(_ reason: InvalidationReason)
}

/// The daemon's targets wired to its evaluator, both ways — the evaluator's sink.
///
/// A new target is evaluated before it is exported (its `InterfacesAdded` carries its
/// real state) and looked up after; a change of a target's state reaches its exported
/// object, which announces it, and the metrics; a host's finished lookup answers the
/// `Refresh` calls waiting for it; a caller that starts holding a target shared
/// already gets its own answer when the uid rules route it otherwise. The rest goes
/// on to `daemon`.
@LoopActor
final class TargetWiring: EvaluationSink {
    /// The root object's target.
    let internet: TargetObject
    private let registry: TargetRegistry
    private let evaluator: TargetEvaluator
    private let metrics: MetricsObject
    /// Hears of each change of the internet's answer.
    private let logger: Logger
    /// Weak: the daemon owns this.
    weak var daemon: (any EvaluationEvents)?

    init(internet: TargetObject, registry: TargetRegistry, evaluator: TargetEvaluator, metrics: MetricsObject,
         logger: Logger) {
        self.internet = internet
        self.registry = registry
        self.evaluator = evaluator
        self.metrics = metrics
        self.logger = logger
        // Evaluated before it is exported: its first announcement is its real state (Status -1
        // only while a host's first lookup is in flight or nothing is known yet).
        registry.onCreated = { object in evaluator.apply(evaluator.state(of: object.target), to: object.target) }
        registry.onHeld = { [unowned self] object in
            // A holder whose uid the rules route otherwise: its own answer, told at once.
            if evaluator.refreshViews(of: object.target) { self.targetChanged(object.target, from: object.target.state) }
        }
        registry.onAdded = { [unowned self] object in
            evaluator.resolve(object.target)
            evaluator.hostTargetsChanged(count: self.registry.hostCount)
            self.metrics.targetAdded(object.target)
        }
        registry.onRemoved = { [unowned self] object in
            evaluator.forgetRoutes(of: object.target)
            evaluator.hostTargetsChanged(count: self.registry.hostCount)
            self.metrics.targetRemoved(object.target)
        }
    }

    var evaluatedTargets: [WatchedTarget] { [internet.target] + registry.objects.values.map(\.target) }

    func targetChanged(_ target: WatchedTarget, from old: TargetState) {
        object(for: target)?.announce(from: old)
        // One notice per change of the internet's answer as a person reads it.
        if target === internet.target, target.state.summary != old.summary, target.state.flags != nil {
            let state = target.state
            // A lost route has no interface of its own: the record names the one the internet went
            // through until now (the link whose carrier went), so REACH_INTERFACE= finds the event.
            let interface = state.interface.isEmpty ? old.interface : state.interface
            logger.notice("internet: \(state.summary)", metadata: .event(.internetChanged, [
                "reason": "\(state.reason?.rawValue ?? "")", "interface": "\(interface)",
            ]))
        }
        metrics.targetChanged(target)
    }

    func lookupFinished(_ target: WatchedTarget) { object(for: target)?.answerWaitingCalls() }

    func holdingUsers(of target: WatchedTarget) -> [UserID] {
        // The root's internet is everybody's, held by nobody.
        guard target.spec != .internet(nil) else { return [] }
        return Array(registry.holdersByUser(of: target.spec.key).keys)
    }

    func factsReloaded(_ facts: NetworkFacts) { daemon?.factsReloaded(facts) }

    func pathChanged(_ state: PathState) { daemon?.pathChanged(state) }

    func evaluationFinished() { daemon?.evaluationFinished() }

    func invalidated(_ reason: InvalidationReason) { daemon?.invalidated(reason) }

    private func object(for target: WatchedTarget) -> TargetObject? {
        target === internet.target ? internet : registry.object(for: target)
    }
}
