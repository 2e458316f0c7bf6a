import Logging
import ReachabilityBus
import ReachabilityCore
import ReachabilityPlatform
import ReachabilityLoop

/// Answers from the daemon's own evaluator, running in this process: facts from
/// NetworkManager (libnm) while it runs, else from the kernel; routes from
/// rtnetlink; names through GLib's resolver. Used when no daemon is on the bus.
@LoopActor
final class InProcessBackend: FeedBackend {
    private let evaluator: TargetEvaluator
    /// The target evaluated for each feed, and the feed of each target.
    private var targets: [ObjectIdentifier: WatchedTarget] = [:]
    private var feedsByTarget: [ObjectIdentifier: Feed<FeedKey>] = [:]
    /// Work waiting for the first facts.
    private var waitingForFacts: [() -> Void] = []
    /// The path feed, while a path monitor in this process runs.
    private var pathFeed: Feed<PathKey>?

    /// Everything it makes logs to `logger` (the library's, the application's).
    init(logger: Logger) throws(ReachabilityError) {
        evaluator = TargetEvaluator(refreshInterval: 300, logger: logger)
        evaluator.sink = self
        do {
            // A library logs at info or below (swift-log's rule): NetworkManager out of
            // reach is a fallback to the kernel's facts here, not an administrator's warning.
            try evaluator.start(mode: .auto, failureLevel: .info)
        } catch {
            throw .serviceUnavailable("cannot watch the kernel's network state: \(error)")
        }
    }

    func open(_ feed: Feed<FeedKey>) {
        let target: WatchedTarget
        switch feed.key {
        case .input(let input): target = WatchedTarget(input)
        case .unresolvable: return feed.publish(Runtime.answer(feed.key)!, isAnswer: true)  // never sent here
        }
        targets[ObjectIdentifier(feed)] = target
        feedsByTarget[ObjectIdentifier(target)] = feed
        if evaluator.hasFacts { evaluator.apply(evaluator.state(of: target), to: target) }
        evaluator.resolve(target)
        hostTargetsChanged()
        feed.opened(nil)
        publish(target)
    }

    func close(_ feed: Feed<FeedKey>) {
        guard let target = targets.removeValue(forKey: ObjectIdentifier(feed)) else { return }
        feedsByTarget[ObjectIdentifier(target)] = nil
        target.cancel()
        hostTargetsChanged()
    }

    /// The target's state to its feed; a real answer once the facts were read and a host's lookup ended.
    private func publish(_ target: WatchedTarget) {
        feedsByTarget[ObjectIdentifier(target)]?.publish(target.state,
                                                         isAnswer: evaluator.hasFacts && target.firstLookupFinished)
    }

    private func hostTargetsChanged() {
        evaluator.hostTargetsChanged(count: targets.values.lazy.filter { $0.host != nil }.count)
    }

    /// The evaluator evaluates the paths only while this feed exists; once it has
    /// facts, setting `isPathWanted` makes `pathState` current at once.
    func openPath(_ feed: Feed<PathKey>) {
        pathFeed = feed
        evaluator.isPathWanted = true
        feed.opened(nil)
        if evaluator.hasFacts { feed.publish(evaluator.pathState, isAnswer: true) }
    }

    func closePath(_ feed: Feed<PathKey>) {
        guard pathFeed === feed else { return }
        pathFeed = nil
        evaluator.isPathWanted = false
    }

    func query(_ key: FeedKey, _ completion: @escaping (Result<ReachabilityState, ReachabilityError>) -> Void) {
        let answer = { [unowned self] in
            switch key {
            case .input(.internet): completion(.success(self.evaluator.internetState))
            case .input(.address(let address)): completion(.success(self.evaluator.state(of: address)))
            case .input(.pair(let local, let remote)): completion(.success(self.evaluator.state(ofPair: local, remote)))
            case .input(.host(let name)): self.evaluator.evaluate(host: name) { completion(.success($0)) }
            case .unresolvable: completion(.success(Runtime.answer(key)!))  // never sent here
            }
        }
        if evaluator.hasFacts { answer() } else { waitingForFacts.append(answer) }
    }
}

/// Evaluation results go to the feeds.
extension InProcessBackend: EvaluationSink {
    var evaluatedTargets: [WatchedTarget] { Array(targets.values) }

    func targetChanged(_ target: WatchedTarget, from old: TargetState) { publish(target) }

    func lookupFinished(_ target: WatchedTarget) { publish(target) }

    func pathChanged(_ state: PathState) { pathFeed?.publish(state, isAnswer: evaluator.hasFacts) }

    func invalidated(_ reason: InvalidationReason) { pathFeed?.invalidate(reason) }

    func evaluationFinished() {
        for target in targets.values { publish(target) }
        // The first evaluation is the path's first answer (`pathChanged` says nothing if it is still `.none`).
        pathFeed?.publish(evaluator.pathState, isAnswer: true)
        let waiting = waitingForFacts
        waitingForFacts = []
        for work in waiting { work() }
    }
}
