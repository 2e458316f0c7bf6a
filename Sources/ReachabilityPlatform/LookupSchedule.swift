import ReachabilityCore
import ReachabilityFairness
import ReachabilityLoop

/// Host lookups owed at a time of their own, not on a network event:
///
/// - after a temporary failure (`ResolveError.isTemporary`): the network is back, but no
///   name server answers yet — NetworkManager has not rewritten resolv.conf, the server is
///   not reachable yet, or it failed (SERVFAIL). Such a name is looked up again on its own
///   after 0.5 s, then 1 s, 2 s… (`delays`), and after the last every
///   `NameLifetime.outageRetry` (30 s) while it keeps failing so: an outage longer than
///   the quick retries is followed within that, not only at the refresh interval;
/// - when its answer's lifetime runs out (its DNS TTL: `NameResolver.lifetime`), held
///   between 5 s and the refresh interval, its last fifth spread at random so that names
///   given one TTL at one moment do not come due together (`NameLifetime.delay`).
///
/// One timer, at the earliest lookup owed (the ones due shortly after it are made with
/// it), and none while none is owed: an idle evaluator never wakes for them. A lookup owed
/// is a lookup like any other, made through `TargetEvaluator.resolve` and so charged to
/// the host's owner in the resolver's queue. It is owed no more once any lookup of the
/// name starts (a network change, the refresh timer, `Refresh`), or once its target
/// goes away (`WatchedHost.cancel()`).
@LoopActor
final class LookupSchedule {
    /// The wait before the retry that follows the first, second… temporary failure in a row
    /// (microseconds); after as many failures as there are waits, `NameLifetime.outageRetry`.
    static let delays: [Int64] = [500_000, 1_000_000, 2_000_000, 4_000_000, 8_000_000, 16_000_000]
    /// Lookups due within this long after the timer's deadline are made when it fires: a
    /// burst of failures costs one wake-up, not one per name.
    static let coalescing = ServiceLimits.standard.lookupCoalescing

    /// The targets owed a lookup, by their host, and when.
    private var owed: [ObjectIdentifier: (target: WatchedTarget, due: Int64)] = [:]
    private var timer: SourceHandle?
    /// When the timer fires (monotonic microseconds); `nil`: there is no timer.
    private(set) var deadline: Int64?
    /// Looks a target's name up again.
    private let lookUp: (WatchedTarget) -> Void

    init(lookUp: @escaping (WatchedTarget) -> Void) {
        self.lookUp = lookUp
    }

    /// How many targets are owed a lookup.
    var count: Int { owed.count }

    /// When `host`'s lookup is owed (monotonic microseconds), if it is.
    func due(_ host: WatchedHost) -> Int64? { owed[ObjectIdentifier(host)]?.due }

    /// The wait before the retry after the `failures`th temporary failure in a row.
    static func retryDelay(failures: Int) -> Int64 {
        delays.indices.contains(failures - 1) ? delays[failures - 1] : NameLifetime.outageRetry
    }

    /// Owes `target` a lookup after its `failures`th temporary failure in a row,
    /// `retryDelay(failures:)` from `now`.
    func owe(_ target: WatchedTarget, failures: Int, now: Int64 = MonotonicClock.microseconds()) {
        owe(target, at: now + Self.retryDelay(failures: max(1, failures)))
    }

    /// Owes `target` a lookup at `due` (monotonic microseconds), instead of any owed before.
    func owe(_ target: WatchedTarget, at due: Int64) {
        guard let host = target.host else { return }
        owed[ObjectIdentifier(host)] = (target, due)
        host.schedule = self
        if deadline.map({ due < $0 }) ?? true { arm(at: due) }
    }

    /// `host` is owed nothing any more; the timer goes with the last lookup owed, and follows
    /// the next one when it was this one's (it never fires for nothing).
    func forget(_ host: WatchedHost) {
        guard let gone = owed.removeValue(forKey: ObjectIdentifier(host)) else { return }
        host.schedule = nil
        if owed.isEmpty {
            timer = nil
            deadline = nil
        } else if gone.due == deadline, let next = owed.values.lazy.map(\.due).min(), next > gone.due {
            arm(at: next)
        }
    }

    /// Makes the lookups due by `now` (and those due shortly after), earliest first, and
    /// arms the timer for the rest. The timer calls it; a test may call it itself.
    func makeDue(now: Int64 = MonotonicClock.microseconds()) {
        timer = nil
        deadline = nil
        let due = owed.filter { $0.value.due <= now + Self.coalescing }.sorted { $0.value.due < $1.value.due }
        for (key, entry) in due {
            owed[key] = nil
            entry.target.host?.schedule = nil
        }
        for (_, entry) in due { lookUp(entry.target) }
        if deadline == nil, let next = owed.values.lazy.map(\.due).min() { arm(at: next) }
    }

    private func arm(at due: Int64) {
        deadline = due
        let wait = max(0, due - MonotonicClock.microseconds()) / 1000
        timer = Sources.after(milliseconds: UInt32(clamping: wait)) { [unowned self] in self.makeDue() }
    }
}
