import ReachabilityCore
import ReachabilityLoop

/// One watched target in this process, shared by every subscription to it, on the
/// loop thread. It is the one place that knows whether the target has had its first
/// answer (`isSettled`): before it, nobody hears anything; from it on, each newcomer
/// gets the current state at once, and everybody each change.
@LoopActor
final class Feed {
    let key: FeedKey
    private(set) var state: ReachabilityState = .unknown
    /// The backend has given its first real answer.
    private(set) var isSettled = false
    private var listeners: [Int: Listener] = [:]
    /// Listeners waiting to learn whether the watch could be set up (`nil` once it is known).
    private var opening: [Int]? = []
    /// Called once when the watch ends with an error (the runtime forgets the feed).
    var ended: (() -> Void)?

    /// Who hears a feed: each answer, or the error that ended the watch (after which it hears nothing).
    struct Listener {
        let receive: (ReachabilityState) -> Void
        let end: (ReachabilityError) -> Void
        /// Whether the watch could be set up (`nil`: it could), once.
        let established: (ReachabilityError?) -> Void
    }

    init(key: FeedKey) { self.key = key }

    var isEmpty: Bool { listeners.isEmpty }

    func add(_ id: Int, _ listener: Listener) {
        listeners[id] = listener
        if opening != nil { return opening!.append(id) }
        listener.established(nil)
        if isSettled { listener.receive(state) }
    }

    func remove(_ id: Int) {
        listeners[id] = nil
        opening?.removeAll { $0 == id }
    }

    /// The backend has set the watch up (or could not: every listener ends with the error).
    func opened(_ error: ReachabilityError?) {
        let waiting = (opening ?? []).compactMap { listeners[$0] }
        opening = nil
        for listener in waiting { listener.established(error) }
        if let error { return fail(error) }
        if isSettled { for listener in waiting { listener.receive(state) } }
    }

    /// A state from the backend; `settled` when it is a real answer (the first one settles the feed).
    func publish(_ new: ReachabilityState, settled: Bool) {
        let first = settled && !isSettled
        let changed = new != state
        state = new
        isSettled = isSettled || settled
        guard isSettled, changed || first else { return }
        let waiting = Set(opening ?? [])
        for (id, listener) in listeners where !waiting.contains(id) { listener.receive(state) }
    }

    /// The watch ended with an error; every listener hears it and is dropped.
    func fail(_ error: ReachabilityError) {
        let all = listeners.values
        listeners = [:]
        opening = opening.map { _ in [] }
        ended?()
        ended = nil
        for listener in all { listener.end(error) }
    }
}

/// A source of feeds: the daemon or the in-process engine. Used on the loop thread.
@LoopActor
protocol FeedBackend: AnyObject {
    /// Starts watching `feed.key`, publishing into `feed`; calls `feed.opened` when set up.
    func open(_ feed: Feed)
    /// Stops watching (the last subscriber left).
    func close(_ feed: Feed)
    /// One answer for `key`, without a watch.
    func query(_ key: FeedKey, _ completion: @escaping (Result<ReachabilityState, ReachabilityError>) -> Void)
    /// Starts following the per-interface paths, publishing into `feed` (one per backend).
    func openPath(_ feed: PathFeed)
    /// Stops following them (the last subscriber left).
    func closePath(_ feed: PathFeed)
}
