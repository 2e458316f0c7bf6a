import Dispatch
import Glibc
import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop
import ReachabilityPlatform
import Synchronization

/// Who gets a feed's states: a manager's listener or an update sequence.
package struct Subscriber: Sendable {
    let receive: @Sendable (ReachabilityState) -> Void
    let fail: @Sendable (ReachabilityError) -> Void

    package init(receive: @escaping @Sendable (ReachabilityState) -> Void,
                 fail: @escaping @Sendable (ReachabilityError) -> Void) {
        self.receive = receive
        self.fail = fail
    }
}

/// One watched target in this process, shared by every subscriber to it.
/// Lives on the loop thread. Subscribers get the current state once it is a
/// real answer, then every change.
@LoopActor
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

/// The library's engine room: the daemon client and (when needed) the in-process
/// engine, on `LoopActor` — the loop thread the library starts in this process.
@LoopActor
package final class Runtime {
    package static let shared = Runtime()

    private var daemon: DaemonBackend?
    private var inProcess: InProcessBackend?
    private var feeds: [ReachabilityMode: [FeedKey: Feed]] = [:]
    private var feedOfSubscriber: [Int: (ReachabilityMode, FeedKey)] = [:]
    /// Subscribers whose mode is still being chosen; one that leaves meanwhile is dropped here.
    private var choosing: Set<Int> = []
    /// The per-interface paths, one feed per mode while anyone follows them (see PathFeed.swift).
    var pathFeeds: [ReachabilityMode: PathFeed] = [:]
    var pathFeedOfSubscriber: [Int: ReachabilityMode] = [:]

    private init() {}

    // MARK: From any thread

    private nonisolated static let ids = Atomic<Int>(0)

    /// A number naming one subscription.
    package nonisolated static func newID() -> Int { ids.add(1, ordering: .relaxed).newValue }

    /// Runs `body` on the library's loop, later (never inside the caller, also when the
    /// caller is the loop: a `deinit` that runs in the middle of delivering an update
    /// must not tear the feed down inside that delivery). Starts the loop on first use.
    package nonisolated static func send(_ body: @escaping @LoopActor @Sendable (Runtime) -> Void) {
        _ = started
        Task { @LoopActor in body(Runtime.shared) }
    }

    /// Once per process: the log set up for a library, the loop thread started.
    private nonisolated static let started: Bool = {
        // A library keeps quiet on the host program's standard error, unless asked.
        let debug = getenv("REACHABILITY_DEBUG").map { String(cString: $0) } ?? ""
        Log.program = debug.isEmpty || debug == "0" ? nil : "reachability"
        Log.verbose = Log.program != nil
        // Otherwise its records are the application's (swift-log).
        if Log.program == nil { ReachabilityLogging.install() }
        LoopThread.start()
        return true
    }()

    /// The value `body` hands to its second argument on the loop; the task waits, no thread blocks.
    package nonisolated static func answer<T: Sendable>(
        _ body: @escaping @LoopActor @Sendable (Runtime, @escaping @Sendable (T) -> Void) -> Void
    ) async -> T {
        await withCheckedContinuation { continuation in
            send { runtime in body(runtime) { continuation.resume(returning: $0) } }
        }
    }

    /// `answer` for a synchronous caller: the one place a caller's thread waits for the
    /// loop, for the members Alamofire's API makes synchronous (`status`, `flags`,
    /// `startListening`'s result, `mode`). Never from the loop's thread.
    package nonisolated static func wait<T: Sendable>(
        _ body: @escaping @LoopActor @Sendable (Runtime, @escaping @Sendable (T) -> Void) -> Void
    ) -> T {
        precondition(!LoopExecutor.shared.isCurrent, "Reachability: a blocking call on the library's own thread")
        let handover = Handover<T>()
        send { runtime in body(runtime) { handover.put($0) } }
        return handover.take()
    }

    // MARK: On the loop

    /// The mode to use: `requested`, or the daemon when it is on the system bus
    /// (running or activatable), else in-process. Asks the bus without waiting.
    func chooseMode(_ requested: ReachabilityMode?,
                    _ done: @escaping (Result<ReachabilityMode, ReachabilityError>) -> Void) {
        if requested == .inProcess { return done(.success(.inProcess)) }
        switch daemonBackend() {
        case .success(let daemon):
            daemon.isServiceAvailable { available in
                if available {
                    Log.debug("answering through \(ServiceNames.busName) on the system bus")
                    return done(.success(.daemon))
                }
                if requested != .daemon {
                    Log.info("\(ServiceNames.busName) is not on the system bus; answering in-process")
                }
                done(requested == .daemon
                    ? .failure(.serviceUnavailable("\(ServiceNames.busName) is not on the system bus"))
                    : .success(.inProcess))
            }
        case .failure(let error):
            if requested != .daemon { Log.info("cannot use the system bus (\(error)); answering in-process") }
            done(requested == .daemon ? .failure(error) : .success(.inProcess))
        }
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

    /// Calls `body` with the mode `choice` settles on, unless subscriber `id` left meanwhile.
    func whenChosen(_ id: Int, _ choice: ModeChoice,
                    _ body: @escaping (Result<ReachabilityMode, ReachabilityError>) -> Void) {
        choosing.insert(id)
        choice.get(self) { [unowned self] result in
            guard self.choosing.remove(id) != nil else { return }
            body(result)
        }
    }

    /// Adds a subscriber to the feed of `key` (created and opened on first use).
    package func subscribe(_ id: Int, key: FeedKey, choice: ModeChoice, _ subscriber: Subscriber,
                   established: @escaping (ReachabilityError?) -> Void) {
        if case .unresolvable = key {
            // Nothing to watch: the answer is final, and no backend hears of the name.
            established(nil)
            return subscriber.receive(Self.answer(key)!)
        }
        whenChosen(id, choice) { [unowned self] result in
            switch result {
            case .success(let mode): self.subscribe(id, key: key, mode: mode, subscriber, established: established)
            case .failure(let error): established(error)
            }
        }
    }

    private func subscribe(_ id: Int, key: FeedKey, mode: ReachabilityMode, _ subscriber: Subscriber,
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

    /// Forgets subscriber `id` if its mode is still being chosen; whether it was.
    func dropWhileChoosing(_ id: Int) -> Bool { choosing.remove(id) != nil }

    package func unsubscribe(_ id: Int) {
        if dropWhileChoosing(id) { return }
        guard let (mode, key) = feedOfSubscriber.removeValue(forKey: id), let feed = feeds[mode]?[key] else { return }
        feed.remove(id)
        guard feed.isEmpty else { return }
        feeds[mode]?[key] = nil
        try? backend(mode).get().close(feed)
    }

    package func query(_ key: FeedKey, choice: ModeChoice,
               _ completion: @escaping (Result<ReachabilityState, ReachabilityError>) -> Void) {
        if let answer = Self.answer(key) { return completion(.success(answer)) }
        choice.get(self) { [unowned self] result in
            switch result.flatMap({ self.backend($0) }) {
            case .success(let backend): backend.query(key, completion)
            case .failure(let error): completion(.failure(error))
            }
        }
    }

    /// The answer for a key that needs no backend: a name that can never resolve is
    /// not reachable (flags known and empty, as Apple's for a failed lookup), its
    /// error the reason. `nil` for every other key.
    nonisolated static func answer(_ key: FeedKey) -> ReachabilityState? {
        guard case .unresolvable(_, let reason) = key else { return nil }
        return ReachabilityState(flags: [], error: reason)
    }

    /// Every target the daemon watches, with its state.
    package func daemonTargets(_ completion: @escaping (Result<[ReachabilitySnapshot], ReachabilityError>) -> Void) {
        switch daemonBackend() {
        case .success(let daemon): daemon.watchedTargets(completion)
        case .failure(let error): completion(.failure(error))
        }
    }
}

/// Where one manager's answers come from, chosen on the loop once, when first needed,
/// without blocking anyone: until the bus has answered, uses of it wait their turn.
@LoopActor
package final class ModeChoice {
    private let requested: ReachabilityMode?
    private var result: Result<ReachabilityMode, ReachabilityError>?
    private var waiting: [(Result<ReachabilityMode, ReachabilityError>) -> Void]?

    package nonisolated init(requested: ReachabilityMode?) { self.requested = requested }

    /// Calls `done` with the mode, at once when it is known.
    package func get(_ runtime: Runtime, _ done: @escaping (Result<ReachabilityMode, ReachabilityError>) -> Void) {
        if let result { return done(result) }
        if waiting != nil { return waiting!.append(done) }
        waiting = [done]
        runtime.chooseMode(requested) { [self] result in
            self.result = result
            let all = waiting ?? []
            waiting = nil
            for done in all { done(result) }
        }
    }
}

/// A value the loop hands to a thread waiting for it (`Runtime.wait`).
private final class Handover<T: Sendable>: Sendable {
    private let value = Mutex<T?>(nil)
    private let arrived = DispatchSemaphore(value: 0)

    func put(_ new: T) {
        value.withLock { $0 = new }
        arrived.signal()
    }

    func take() -> T {
        arrived.wait()
        return value.withLock { $0! }
    }
}
