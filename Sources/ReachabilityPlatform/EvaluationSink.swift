import ReachabilityCore
import ReachabilityLoop

/// Where a `TargetEvaluator`'s results go — the daemon's exported objects, or the
/// client library's in-process feeds. It is the one way results travel up from
/// evaluation: targets are plain values the evaluator updates, and it tells the
/// sink what changed.
@LoopActor
public protocol EvaluationSink: AnyObject {
    /// Every target to evaluate after a change.
    var evaluatedTargets: [WatchedTarget] { get }
    /// `target.state` is new; it was `old`.
    func targetChanged(_ target: WatchedTarget, from old: TargetState)
    /// A host's lookup ended and no other follows: its answer is as fresh as it gets.
    func lookupFinished(_ target: WatchedTarget)
    /// The facts were read again (after a change, or for a refresh).
    func factsReloaded(_ facts: NetworkFacts)
    /// Every target was evaluated after a change.
    func evaluationFinished()
    /// The per-interface paths changed (they are evaluated only while wanted); while uid rules
    /// are in force, also after an evaluation that left them as they were, since a holder's
    /// own paths (`TargetEvaluator.pathState(uid:)`) may have changed meanwhile.
    func pathChanged(_ state: PathState)
    /// The users whose callers hold `target` (each gets its own answer when the uid
    /// rules route it otherwise: `WatchedTarget.views`).
    func holdingUsers(of target: WatchedTarget) -> [UserID]
    /// A connection made before may be broken although no flag need change (docs/dbus-api.md,
    /// "The network under a connection"): told once per event, after the evaluation it caused.
    func invalidated(_ reason: InvalidationReason)
}

extension EvaluationSink {
    public func lookupFinished(_ target: WatchedTarget) {}
    public func factsReloaded(_ facts: NetworkFacts) {}
    public func evaluationFinished() {}
    public func pathChanged(_ state: PathState) {}
    public func holdingUsers(of target: WatchedTarget) -> [UserID] { [] }
    public func invalidated(_ reason: InvalidationReason) {}
}
