import Dispatch
import Glibc
import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop
import ReachabilityPlatform
import Synchronization

/// A value one thread hands to a thread waiting for it.
private final class Answer<T: Sendable>: Sendable {
    let value = Mutex<T?>(nil)
    let ready = Atomic<Bool>(false)
    let done = DispatchSemaphore(value: 0)
}

/// Who gets a feed's states: a manager's listener or an update sequence.
struct Subscriber: Sendable {
    let receive: @Sendable (ReachabilityState) -> Void
    let fail: @Sendable (ReachabilityError) -> Void
}

/// One watched target in this process, shared by every subscriber to it.
/// Lives on the loop thread. Subscribers get the current state once it is a
/// real answer, then every change.
final class Feed {
    let key: FeedKey
    private(set) var state: ReachabilityState = .unknown
    private(set) var isSettled = false
    private var subscribers: [Int: Subscriber] = [:]
    /// Callers waiting to learn whether the watch could be set up.
    private var opening: [(ReachabilityError?) -> Void]? = []

    init(key: FeedKey) { self.key = key }

    var isEmpty: Bool { subscribers.isEmpty }

    func add(_ id: Int, _ subscriber: Subscriber, established: @escaping (ReachabilityError?) -> Void) {
        subscribers[id] = subscriber
        if opening != nil {
            opening!.append(established)
        } else {
            established(nil)
            if isSettled { subscriber.receive(state) }
        }
    }

    func remove(_ id: Int) { subscribers[id] = nil }

    /// The backend has set the watch up (or could not).
    func opened(_ error: ReachabilityError?) {
        let waiting = opening ?? []
        opening = nil
        for established in waiting { established(error) }
        if let error { fail(error) } else if isSettled { for s in subscribers.values { s.receive(state) } }
    }

    /// A new state from the backend; `settled` once it is a real answer.
    func publish(_ new: ReachabilityState, settled: Bool) {
        let wasSettled = isSettled
        let changed = new != state
        state = new
        isSettled = isSettled || settled
        guard opening == nil, isSettled, changed || !wasSettled else { return }
        for s in subscribers.values { s.receive(state) }
    }

    /// The watch ended with an error; every subscriber hears it and is dropped.
    func fail(_ error: ReachabilityError) {
        let all = subscribers.values
        subscribers = [:]
        for s in all { s.fail(error) }
    }
}

/// A source of feeds: the daemon or the in-process engine. Used on the loop thread.
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

/// The library's engine room: one loop thread per process, running the daemon
/// client and (when needed) the in-process engine. Everything mutable below is
/// touched on that thread only.
final class Runtime: @unchecked Sendable {
    static let shared = Runtime()

    let loop: LoopThread
    private let ids = Atomic<Int>(0)
    // Loop thread only:
    private var daemon: DaemonBackend?
    private var inProcess: InProcessBackend?
    private var feeds: [ReachabilityMode: [FeedKey: Feed]] = [:]
    private var feedOfSubscriber: [Int: (ReachabilityMode, FeedKey)] = [:]
    /// The per-interface paths, one feed per mode while anyone follows them (see PathFeed.swift).
    var pathFeeds: [ReachabilityMode: PathFeed] = [:]
    var pathFeedOfSubscriber: [Int: ReachabilityMode] = [:]

    private init() {
        // A library keeps quiet on the host program's standard error, unless asked.
        let debug = getenv("REACHABILITY_DEBUG").map { String(cString: $0) } ?? ""
        Log.program = debug.isEmpty || debug == "0" ? nil : "reachability"
        Log.verbose = Log.program != nil
        loop = LoopThread()
    }

    func newID() -> Int { ids.add(1, ordering: .relaxed).newValue }

    /// Runs `body` on the loop and waits for the value it hands to its second argument.
    /// Never call it from the loop thread (listeners run on their own queues).
    func sync<T: Sendable>(_ body: @escaping @Sendable (Runtime, @escaping @Sendable (T) -> Void) -> Void) -> T {
        precondition(!loop.isCurrent, "Reachability: a blocking call on the library's own thread")
        let answer = Answer<T>()
        loop.perform {
            body(self) { value in
                answer.value.withLock { $0 = value }
                answer.ready.store(true, ordering: .releasing)
                answer.done.signal()
            }
        }
        answer.done.wait()
        // The semaphore orders the two threads; this acquire shows ThreadSanitizer the same.
        precondition(answer.ready.load(ordering: .acquiring))
        return answer.value.withLock { $0! }
    }

    /// `sync` for async callers: the task waits, no thread blocks.
    func async<T: Sendable>(_ body: @escaping @Sendable (Runtime, @escaping @Sendable (T) -> Void) -> Void) async -> T {
        await withCheckedContinuation { continuation in
            loop.perform { body(self) { continuation.resume(returning: $0) } }
        }
    }

    // MARK: On the loop thread

    /// The mode to use: `requested`, or the daemon when it is on the system bus
    /// (running or activatable), else in-process.
    func resolveMode(_ requested: ReachabilityMode?) -> Result<ReachabilityMode, ReachabilityError> {
        if requested == .inProcess { return .success(.inProcess) }
        switch daemonBackend() {
        case .success(let daemon) where daemon.isServiceAvailable():
            return .success(.daemon)
        case .success:
            if requested == .daemon {
                return .failure(.serviceUnavailable("\(ServiceNames.busName) is not on the system bus"))
            }
        case .failure(let error):
            if requested == .daemon { return .failure(error) }
        }
        return .success(.inProcess)
    }

    /// The backend in `slot`, made on first use (a failure is not kept: the next use tries again).
    private static func made<B>(_ slot: inout B?, _ make: () throws(ReachabilityError) -> B)
        -> Result<B, ReachabilityError>
    {
        if let slot { return .success(slot) }
        do {
            let backend = try make()
            slot = backend
            return .success(backend)
        } catch {
            return .failure(error)
        }
    }

    private func daemonBackend() -> Result<DaemonBackend, ReachabilityError> {
        Self.made(&daemon) { () throws(ReachabilityError) in try DaemonBackend() }
    }

    func backend(_ mode: ReachabilityMode) -> Result<FeedBackend, ReachabilityError> {
        switch mode {
        case .daemon: daemonBackend().map { $0 }
        case .inProcess: Self.made(&inProcess) { () throws(ReachabilityError) in try InProcessBackend() }.map { $0 }
        }
    }

    /// Adds a subscriber to the feed of `key` (created and opened on first use).
    func subscribe(_ id: Int, key: FeedKey, mode: ReachabilityMode, _ subscriber: Subscriber,
                   established: @escaping (ReachabilityError?) -> Void) {
        let backend: FeedBackend
        switch self.backend(mode) {
        case .success(let b): backend = b
        case .failure(let error): return established(error)
        }
        feedOfSubscriber[id] = (mode, key)
        if let feed = feeds[mode]?[key] {
            feed.add(id, subscriber, established: established)
            return
        }
        let feed = Feed(key: key)
        feeds[mode, default: [:]][key] = feed
        feed.add(id, subscriber) { [unowned self] error in
            // A watch that could not be set up is forgotten, so a later subscriber tries again.
            if error != nil, self.feeds[mode]?[key] === feed { self.feeds[mode]?[key] = nil }
            established(error)
        }
        backend.open(feed)
    }

    func unsubscribe(_ id: Int) {
        guard let (mode, key) = feedOfSubscriber.removeValue(forKey: id), let feed = feeds[mode]?[key] else { return }
        feed.remove(id)
        guard feed.isEmpty else { return }
        feeds[mode]?[key] = nil
        try? backend(mode).get().close(feed)
    }

    func query(_ key: FeedKey, mode: ReachabilityMode,
               _ completion: @escaping (Result<ReachabilityState, ReachabilityError>) -> Void) {
        switch backend(mode) {
        case .success(let backend): backend.query(key, completion)
        case .failure(let error): completion(.failure(error))
        }
    }

    /// Every target the daemon watches, with its state.
    func daemonTargets(_ completion: @escaping (Result<[ReachabilitySnapshot], ReachabilityError>) -> Void) {
        switch daemonBackend() {
        case .success(let daemon): daemon.watchedTargets(completion)
        case .failure(let error): completion(.failure(error))
        }
    }
}
