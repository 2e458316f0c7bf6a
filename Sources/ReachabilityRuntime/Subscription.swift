import Dispatch
import ReachabilityCore
import ReachabilityLoop

/// One client's subscription to one feed: to a target, what the three façades (Apple's
/// `SCNetworkReachability`, Alamofire's manager, the `updates` sequence) each hold while
/// they listen; to the paths (`PathKey`), what a path monitor holds. One type for both.
///
/// `start` hands it to the runtime's loop, which chooses where answers come from
/// (once per process: `Runtime.mode`) and joins the topic's feed (one per topic
/// and process: `Feed`). From the feed's first real answer on, `handler` gets the
/// current state, then each change, on `queue` (or, without one, on the loop's
/// thread, where it must return at once); `.failure` once, when the topic cannot
/// be watched or its watch ended. After `cancel` returns, `handler` is not called
/// again for it (a call already running on `queue` finishes).
package final class Subscription<Key: FeedTopic>: Sendable {
    package typealias Handler = @Sendable (Result<Key.State, ReachabilityError>) -> Void

    /// The number naming it (`Runtime.newID()`, unless the caller made it first).
    package let id: Int
    let key: Key
    /// The mode asked for (`nil`: the daemon when it is on the system bus, else in-process).
    let requested: ReachabilityMode?
    private let queue: DispatchQueue?
    private let handler: Handler
    private let shared = Guarded(Shared())

    private struct Shared: Sendable {
        var latest: Key.State?
        var isCancelled = false
        var hasEnded = false
    }

    package init(id: Int = Runtime.newID(), _ key: Key, mode requested: ReachabilityMode?,
                 on queue: DispatchQueue?, _ handler: @escaping Handler) {
        self.id = id
        self.key = key
        self.requested = requested
        self.queue = queue
        self.handler = handler
    }

    /// The latest answer handed on (`nil` before the first).
    package var latest: Key.State? { shared.withLock { $0.latest } }

    var isCancelled: Bool { shared.withLock { $0.isCancelled } }

    /// Starts it; `established`, if given, is told on the loop whether the topic could be watched.
    package func start(established: (@Sendable (ReachabilityError?) -> Void)? = nil) {
        Runtime.send { runtime in runtime.subscribe(self, established: established ?? { _ in }) }
    }

    /// `start`, then waits for whether the topic could be watched (`nil`: it is). For a
    /// caller whose API answers that synchronously (Alamofire's `startListening`); never
    /// from the loop's thread.
    package func startAndWait() -> ReachabilityError? {
        Runtime.wait { runtime, done in runtime.subscribe(self, established: done) }
    }

    /// Stops it: no `handler` call starts after this returns. The feed lets it go later, on the loop.
    package func cancel() {
        let wasCancelled = shared.withLock { state in
            defer { state.isCancelled = true }
            return state.isCancelled
        }
        if !wasCancelled { Runtime.send { runtime in runtime.unsubscribe(self) } }
    }

    // MARK: From the loop

    /// How its feed reaches it.
    @LoopActor func listener(established: @escaping (ReachabilityError?) -> Void) -> Feed<Key>.Listener {
        Feed.Listener(receive: { self.deliver(.success($0)) }, end: { self.deliver(.failure($0)) },
                      established: established)
    }

    /// An answer, or the end; each end is handed on once, and nothing after it.
    @LoopActor func deliver(_ result: Result<Key.State, ReachabilityError>) {
        let live = shared.withLock { state -> Bool in
            guard !state.isCancelled, !state.hasEnded else { return false }
            switch result {
            case .success(let answer): state.latest = answer
            case .failure: state.hasEnded = true
            }
            return true
        }
        guard live else { return }
        guard let queue else { return handler(result) }
        queue.async { [self] in
            guard !isCancelled else { return }
            handler(result)
        }
    }
}
