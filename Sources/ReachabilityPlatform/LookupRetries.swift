import ReachabilityCore
import ReachabilityLoop

/// Host lookups owed again after a temporary failure (`ResolveError.isTemporary`): the
/// network is back, but no name server answers yet — NetworkManager has not rewritten
/// resolv.conf, the server is not reachable yet, or it failed (SERVFAIL). Such a name is
/// looked up again on its own after 0.5 s, then 1 s, 2 s… (`delays`); after the last,
/// only the refresh timer and the network's events look it up again, as every name.
///
/// One timer, at the earliest retry owed (the ones due shortly after it are made with
/// it), and none while no retry is owed: an idle evaluator never wakes for them. A retry
/// is a lookup like any other, made through `TargetEvaluator.resolve` and so charged to
/// the host's owner in the resolver's queue. It is owed no more once any lookup of the
/// name starts (a network change, the refresh timer, `Refresh`), or once its target
/// goes away (`WatchedHost.cancel()`).
@LoopActor
final class LookupRetries {
    /// The wait before the retry that follows the first, second… temporary failure in a row
    /// (microseconds); after as many failures as there are waits, none follows.
    static let delays: [Int64] = [500_000, 1_000_000, 2_000_000, 4_000_000, 8_000_000, 16_000_000]
    /// Retries due within this long after the timer's deadline are made when it fires: a
    /// burst of failures costs one wake-up, not one per name.
    static let coalescing: Int64 = 100_000

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

    /// How many targets are owed a retry.
    var count: Int { owed.count }

    /// Owes `target` a lookup after its `failures`th temporary failure in a row, `delays`
    /// from `now`; false when it has had all its retries.
    func owe(_ target: WatchedTarget, failures: Int, now: Int64 = MonotonicClock.microseconds()) -> Bool {
        guard let host = target.host, Self.delays.indices.contains(failures - 1) else { return false }
        let due = now + Self.delays[failures - 1]
        owed[ObjectIdentifier(host)] = (target, due)
        host.retries = self
        if deadline.map({ due < $0 }) ?? true { arm(at: due) }
        return true
    }

    /// `host` is owed nothing any more; the timer goes with the last retry owed.
    func forget(_ host: WatchedHost) {
        guard owed.removeValue(forKey: ObjectIdentifier(host)) != nil else { return }
        host.retries = nil
        if owed.isEmpty {
            timer = nil
            deadline = nil
        }
    }

    /// Makes the retries due by `now` (and those due shortly after), earliest first, and
    /// arms the timer for the rest. The timer calls it; a test may call it itself.
    func makeDue(now: Int64 = MonotonicClock.microseconds()) {
        timer = nil
        deadline = nil
        let due = owed.filter { $0.value.due <= now + Self.coalescing }.sorted { $0.value.due < $1.value.due }
        for (key, entry) in due {
            owed[key] = nil
            entry.target.host?.retries = nil
        }
        for (_, entry) in due { lookUp(entry.target) }
        if let next = owed.values.lazy.map(\.due).min() { arm(at: next) }
    }

    private func arm(at due: Int64) {
        deadline = due
        let wait = max(0, due - MonotonicClock.microseconds()) / 1000
        timer = Sources.after(milliseconds: UInt32(clamping: wait)) { [unowned self] in self.makeDue() }
    }
}
