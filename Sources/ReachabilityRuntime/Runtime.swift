import Dispatch
import Glibc
import Logging
import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop
import ReachabilityPlatform
import Synchronization

/// The library's engine room: the daemon client and (when needed) the in-process
/// engine, on `LoopActor` — the loop thread the library starts in this process.
@LoopActor
package final class Runtime {
    package static let shared = Runtime()

    private var daemon: DaemonBackend?
    private var inProcess: InProcessBackend?
    /// Where answers come from, per mode a caller may ask for: chosen once per process.
    private var modes: [ReachabilityMode?: ModeChoice] = [:]
    /// Every feed, of a target or of the paths, by mode and key.
    private var feeds: [FeedSlot: any AnyFeed] = [:]
    /// The feed each subscription joined.
    private var feedOfSubscription: [Int: FeedSlot] = [:]
    /// The library's log, handed to everything the runtime makes: the application's swift-log
    /// (`ReachabilityLogging`), or standard error with `REACHABILITY_DEBUG`.
    package nonisolated let logger: Logger

    private init() {
        logger = ReachabilityLogging.libraryLogger(debug: getenv("REACHABILITY_DEBUG").map { String(cString: $0) })
    }

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

    /// Once per process: the loop thread started.
    private nonisolated static let started: Bool = {
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

    /// Where answers come from for a caller that asked for `requested`: the daemon when
    /// it is on the system bus (running, or the bus can start it), else in-process (`nil`);
    /// or what was asked for, `.daemon` failing without a daemon. Chosen once per process,
    /// when first needed, without blocking anyone: until the bus has answered, callers wait
    /// their turn. A failure is not kept (the next caller asks again).
    package func mode(_ requested: ReachabilityMode?,
                      _ done: @escaping (Result<ReachabilityMode, ReachabilityError>) -> Void) {
        let choice = modes[requested] ?? ModeChoice()
        modes[requested] = choice
        choice.get(done) { [unowned self] decided in self.chooseMode(requested, decided) }
    }

    /// Asks the bus (through the daemon client, which follows the service's name anyway).
    private func chooseMode(_ requested: ReachabilityMode?,
                            _ done: @escaping (Result<ReachabilityMode, ReachabilityError>) -> Void) {
        if requested == .inProcess { return done(.success(.inProcess)) }
        switch daemonBackend() {
        case .success(let daemon):
            daemon.isServiceAvailable { [logger] available in
                if available && daemon.owner.isEmpty && requested != .daemon {
                    return Self.startService(of: daemon, logger: logger, done)
                }
                if available {
                    return Self.checkNamespace(of: daemon, requested: requested, logger: logger, done)
                }
                if requested != .daemon {
                    ReachabilityMode.noteInProcess("no reachabilityd on the system bus")
                    logger.info("\(ServiceNames.busName) is not on the system bus; answering in-process")
                }
                done(requested == .daemon
                    ? .failure(.serviceUnavailable("\(ServiceNames.busName) is not on the system bus"))
                    : .success(.inProcess))
            }
        case .failure(let error):
            if requested != .daemon {
                ReachabilityMode.noteInProcess("no reachabilityd on the system bus")
                logger.info("cannot use the system bus (\(error)); answering in-process")
            }
            done(requested == .daemon ? .failure(error) : .success(.inProcess))
        }
    }

    /// The bus can start the service but it is not running: it is started now, so that a
    /// start that fails (a masked or removed unit, a start that fails or hangs) leaves this
    /// caller answering in-process rather than failing, or waiting for nothing
    /// (`reachctl wait` for `reachability-wait@`). Bounded by `startBound`: a start that fails
    /// is answered at once (a masked unit, a program that exits), one that hangs at most that
    /// long; a daemon that starts slowly (it waits up to 5 s for NetworkManager's first answer)
    /// is still waited for, so that this process shares the service rather than answering
    /// in-process for its life.
    private static func startService(of daemon: DaemonBackend, logger: Logger,
                                     _ done: @escaping (Result<ReachabilityMode, ReachabilityError>) -> Void) {
        daemon.driver("StartServiceByName", [.string(ServiceNames.busName), .uint32(0)],
                      timeoutMilliseconds: Int32(startBound)) { result in
            switch result {
            case .success:
                checkNamespace(of: daemon, requested: nil, logger: logger, done)
            case .failure(let error):
                let why = "the system bus could not start \(ServiceNames.busName) (\(error.message))"
                ReachabilityMode.noteInProcess(why)
                logger.info("\(why); answering in-process")
                done(.success(.inProcess))
            }
        }
    }

    /// How long the choice waits for a running service to answer its first call, in
    /// milliseconds: past it, a caller that did not ask for the daemon answers in-process.
    package static let answerBound: UInt32 = 3000
    /// How long the choice waits for the bus to start the service, in milliseconds.
    package static let startBound: UInt32 = 15_000

    /// The daemon answers for its own network namespace (`Manager.NetworkNamespace`): a process
    /// in another (a container given the host's bus socket) answers in-process instead, for its
    /// own — unless it asked for the daemon, which it then gets, told so in the log. A daemon
    /// that does not say (an older one, 0: unknown) is taken as this namespace's. One that
    /// does not answer within `answerBound` is hung (stopped, or its loop stuck): a caller that
    /// did not ask for the daemon answers in-process instead of waiting on it.
    private static func checkNamespace(of daemon: DaemonBackend, requested: ReachabilityMode?, logger: Logger,
                                       _ done: @escaping (Result<ReachabilityMode, ReachabilityError>) -> Void) {
        daemon.connection.callAsync(
            destination: ServiceNames.busName, path: DaemonBackend.root, interface: DaemonBackend.properties,
            member: "Get", [.string(ServiceNames.managerInterface), .string(Contract.Manager.networkNamespace.name)],
            timeoutMilliseconds: Int32(answerBound)) { result in
            if case .failure(let error) = result, error.name == BusError.noReply, requested != .daemon {
                let why = "\(ServiceNames.busName) did not answer within \(answerBound / 1000) s"
                ReachabilityMode.noteInProcess(why)
                logger.warning("\(why); answering in-process")
                return done(.success(.inProcess))
            }
            let ours = NetworkNamespace.current()
            guard case .success(let values) = result, case .variant(.uint64(let theirs))? = values.first,
                  theirs != 0, ours != 0, theirs != ours else {
                logger.debug("answering through \(ServiceNames.busName) on the system bus")
                return done(.success(.daemon))
            }
            let why = "reachabilityd answers for network namespace \(theirs), this process is in \(ours)"
            if requested == .daemon {
                logger.info("\(why); answering through it as asked: its answers are its namespace's")
                return done(.success(.daemon))
            }
            ReachabilityMode.noteInProcess(why)
            logger.info("\(why); answering in-process")
            done(.success(.inProcess))
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

    func daemonBackend() -> Result<DaemonBackend, ReachabilityError> {
        Self.made(&daemon) { () throws(ReachabilityError) in try DaemonBackend(logger: logger) }
    }

    func backend(_ mode: ReachabilityMode) -> Result<FeedBackend, ReachabilityError> {
        switch mode {
        case .daemon: daemonBackend().map { $0 }
        case .inProcess:
            Self.made(&inProcess) { () throws(ReachabilityError) in try InProcessBackend(logger: logger) }.map { $0 }
        }
    }

    /// Joins `subscription` to its topic's feed (created and opened on first use), once
    /// the mode is chosen; `established` says whether the topic could be watched.
    func subscribe<Key>(_ subscription: Subscription<Key>, established: @escaping (ReachabilityError?) -> Void) {
        if let answer = subscription.key.answerWithoutBackend {
            // Nothing to watch: the answer is final, and no backend hears of the name.
            established(nil)
            return subscription.deliver(.success(answer))
        }
        mode(subscription.requested) { [unowned self] result in
            guard !subscription.isCancelled else { return established(nil) }
            switch result {
            case .success(let mode):
                self.join(subscription.id, subscription.key, mode: mode, subscription.listener(established: established))
            case .failure(let error):
                self.logger.debug("cannot watch \(subscription.key.logName): \(error)")
                established(error)
                subscription.deliver(.failure(error))
            }
        }
    }

    /// Adds `listener` to the feed of `key` in `mode`, made and opened on first use. A feed
    /// whose watch could not be set up, or ended, is forgotten: a later subscriber tries again.
    private func join<Key>(_ id: Int, _ key: Key, mode: ReachabilityMode, _ listener: Feed<Key>.Listener) {
        let backend: FeedBackend
        switch self.backend(mode) {
        case .success(let made): backend = made
        case .failure(let error):
            listener.established(error)
            return listener.end(error)
        }
        let slot = FeedSlot(mode: mode, key: key)
        feedOfSubscription[id] = slot
        if let feed = feed(key, mode) { return feed.add(id, listener) }
        logger.debug("watching \(key.logName) (\(mode))")
        let feed = Feed(key: key)
        feeds[slot] = feed
        feed.ended = { [unowned self, unowned feed] in
            guard self.feeds[slot] === feed else { return }
            self.feeds[slot] = nil
            Key.close(feed, in: backend)
        }
        feed.add(id, listener)
        Key.open(feed, in: backend)
    }

    /// The feed of `key` in `mode`, if this process has one.
    private func feed<Key>(_ key: Key, _ mode: ReachabilityMode) -> Feed<Key>? {
        feeds[FeedSlot(mode: mode, key: key)] as? Feed<Key>
    }

    func unsubscribe<Key>(_ subscription: Subscription<Key>) { unsubscribe(subscription.id) }

    private func unsubscribe(_ id: Int) {
        guard let slot = feedOfSubscription.removeValue(forKey: id), let feed = feeds[slot] else { return }
        feed.remove(id)
        guard feed.isEmpty else { return }
        feeds[slot] = nil
        if let backend = try? backend(slot.mode).get() { feed.close(in: backend) }
    }

    /// One answer for `key`: a feed's of this process when it has one (no bus call), else the
    /// backend's (the daemon's `Query`; an address pair, which `Query` cannot name, through
    /// its feed, held until the first answer: a client holds a target once, through its feed).
    package func query(_ key: FeedKey, mode requested: ReachabilityMode?,
                       _ completion: @escaping (Result<ReachabilityState, ReachabilityError>) -> Void) {
        if let answer = Self.answer(key) { return completion(.success(answer)) }
        mode(requested) { [unowned self] result in
            switch result.flatMap({ mode in self.backend(mode).map { (mode, $0) } }) {
            case .success(let (mode, backend)):
                if let feed = self.feed(key, mode), feed.hasFirstAnswer { return completion(.success(feed.state)) }
                guard mode == .daemon, case .input(.pair) = key else { return backend.query(key, completion) }
                let id = Self.newID()
                var answered = false
                let once = { (result: Result<ReachabilityState, ReachabilityError>) in
                    guard !answered else { return }
                    answered = true
                    completion(result)
                    // Later: not inside the feed's delivery.
                    Runtime.send { runtime in runtime.unsubscribe(id) }
                }
                let listener = Feed<FeedKey>.Listener(receive: { once(.success($0)) },
                                                      end: { once(.failure($0)) }, established: { _ in })
                self.join(id, key, mode: mode, listener)
            case .failure(let error):
                completion(.failure(error))
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

/// Where a feed is kept: its mode and its key (a target's, or the paths').
struct FeedSlot: Hashable {
    let mode: ReachabilityMode
    let key: AnyHashable
}

/// One choice of where answers come from, made once: until the bus has answered,
/// the callers wait their turn; a success is kept, a failure is handed to the
/// waiting callers and forgotten.
@LoopActor
final class ModeChoice {
    private var result: ReachabilityMode?
    private var waiting: [(Result<ReachabilityMode, ReachabilityError>) -> Void]?

    /// Calls `done` with the mode, at once when it is known; `choose` makes the choice when nobody has yet.
    func get(_ done: @escaping (Result<ReachabilityMode, ReachabilityError>) -> Void,
             choose: (@escaping (Result<ReachabilityMode, ReachabilityError>) -> Void) -> Void) {
        if let result { return done(.success(result)) }
        if waiting != nil { return waiting!.append(done) }
        waiting = [done]
        choose { [self] decided in
            result = try? decided.get()
            let all = waiting ?? []
            waiting = nil
            for done in all { done(decided) }
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
