import ReachabilityCore
import ReachabilityLoop

/// What a feed is of: a target (`FeedKey`) or the per-interface paths (`PathKey`). One
/// feed type and one subscription type serve both, so both follow the same rules: the
/// first answer, the current state to each newcomer, each change once, the end, and
/// silence after `cancel`.
package protocol FeedTopic: Hashable, Sendable {
    /// What its feed carries.
    associatedtype State: Equatable & Sendable
    /// The state before the first answer.
    static var initialState: State { get }
    /// The answer when none needs a backend (it is final); `nil` for every other key.
    var answerWithoutBackend: State? { get }
    /// Its name in the log.
    var logName: String { get }
    /// Starts the backend's watch of `feed.key`, publishing into `feed`; `feed.opened` once set up.
    @LoopActor static func open(_ feed: Feed<Self>, in backend: any FeedBackend)
    /// Stops it (the last subscriber left, or the watch ended).
    @LoopActor static func close(_ feed: Feed<Self>, in backend: any FeedBackend)
}

/// One watched topic in this process, shared by every subscription to it, on the
/// loop thread. It is the one place that knows whether the topic has had its first
/// answer (`hasFirstAnswer`): before it, nobody hears anything; from it on, each
/// newcomer gets the current state at once, and everybody each change.
@LoopActor
package final class Feed<Key: FeedTopic> {
    let key: Key
    private(set) var state: Key.State = Key.initialState
    /// The backend has given its first real answer.
    private(set) var hasFirstAnswer = false
    private var listeners: [Int: Listener] = [:]
    /// Listeners waiting to learn whether the watch could be set up (`nil` once it is known).
    private var opening: [Int]? = []
    /// Called once when the watch ends with an error (the runtime forgets the feed).
    var ended: (() -> Void)?

    /// Who hears a feed: each answer, or the error that ended the watch (after which it hears nothing).
    struct Listener {
        let receive: (Key.State) -> Void
        let end: (ReachabilityError) -> Void
        /// Whether the watch could be set up (`nil`: it could), once.
        let established: (ReachabilityError?) -> Void
    }

    init(key: Key) { self.key = key }

    var isEmpty: Bool { listeners.isEmpty }

    func add(_ id: Int, _ listener: Listener) {
        listeners[id] = listener
        if opening != nil { return opening!.append(id) }
        listener.established(nil)
        if hasFirstAnswer { listener.receive(state) }
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
        if hasFirstAnswer { for listener in waiting { listener.receive(state) } }
    }

    /// A state from the backend; `isAnswer` when it is a real answer (the first one is the feed's first answer).
    func publish(_ new: Key.State, isAnswer: Bool) {
        let first = isAnswer && !hasFirstAnswer
        let changed = new != state
        state = new
        hasFirstAnswer = hasFirstAnswer || isAnswer
        guard hasFirstAnswer, changed || first else { return }
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

/// A feed of any topic, as the runtime keeps them.
@LoopActor
protocol AnyFeed: AnyObject {
    var isEmpty: Bool { get }
    func remove(_ id: Int)
    /// Stops the backend's watch.
    func close(in backend: any FeedBackend)
}

extension Feed: AnyFeed {
    func close(in backend: any FeedBackend) { Key.close(self, in: backend) }
}

/// A target's feed: its state, from the backend's watch of it.
extension FeedKey: FeedTopic {
    package static var initialState: ReachabilityState { .unknown }
    package var answerWithoutBackend: ReachabilityState? { Runtime.answer(self) }
    package var logName: String { "\(target)" }
    package static func open(_ feed: Feed<FeedKey>, in backend: any FeedBackend) { backend.open(feed) }
    package static func close(_ feed: Feed<FeedKey>, in backend: any FeedBackend) { backend.close(feed) }
}

/// A source of feeds: the daemon or the in-process engine. Used on the loop thread.
@LoopActor
package protocol FeedBackend: AnyObject {
    /// Starts watching `feed.key`, publishing into `feed`; calls `feed.opened` when set up.
    func open(_ feed: Feed<FeedKey>)
    /// Stops watching (the last subscriber left).
    func close(_ feed: Feed<FeedKey>)
    /// One answer for `key`, without a watch.
    func query(_ key: FeedKey, _ completion: @escaping (Result<ReachabilityState, ReachabilityError>) -> Void)
    /// Starts following the per-interface paths, publishing into `feed` (one per backend);
    /// calls `feed.opened` when set up.
    func openPath(_ feed: Feed<PathKey>)
    /// Stops following them (the last subscriber left).
    func closePath(_ feed: Feed<PathKey>)
}
