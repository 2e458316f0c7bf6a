import Dispatch
import ReachabilityCore
import ReachabilityRuntime

/// Reachability of the internet or of one host, address or address pair, shaped like
/// Alamofire's `NetworkReachabilityManager`, for Swift programs on Linux.
///
/// Answers come from `reachabilityd` when it is on the system bus (shared with
/// every other program, nothing computed twice) and otherwise from the same
/// engine running in this process; `mode` says which.
///
/// ```swift
/// let manager = NetworkReachabilityManager(host: "example.com")
/// manager?.startListening { status in print("now:", status) }
/// ```
///
/// Listeners get the current status first, then each change of status once.
/// `updates` is the same as an `AsyncSequence` of the full state.
///
/// Alamofire 5's public API is here complete, with its access levels (`open`
/// where Alamofire's is), so code written against Alamofire's manager compiles
/// with `import ReachabilitydClient` in place of `import Alamofire`.
///
/// Nothing here blocks on the bus at creation: where the answers come from is
/// chosen on the library's loop when first needed. The members Alamofire makes
/// synchronous (`flags`, `status`, `isReachable…`, `startListening`'s result,
/// `mode`) wait for their answer; everything else is asynchronous.
///
/// `@unchecked` only because the class is `open`, as Alamofire's (which declares
/// it the same way): the compiler checks Sendable for final classes only. Every
/// stored property is a `let` of a Sendable type — what changes lives in
/// `Guarded` values, the loop's part in a `LoopActor` object — and subclasses must keep
/// to the same rule.
open class NetworkReachabilityManager: @unchecked Sendable {
    /// Alamofire's status.
    public enum NetworkReachabilityStatus: Sendable, Hashable {
        /// Not known (yet): no daemon answer, NetworkManager not running, or a name still being looked up.
        case unknown
        case notReachable
        case reachable(ConnectionType)

        /// How the target is reached.
        public enum ConnectionType: Sendable, Hashable {
            case ethernetOrWiFi
            /// Mobile broadband (the `IsWWAN` flag).
            case cellular
        }

        /// The status for a set of flags, Alamofire's (and AFNetworking's) rule: not
        /// reachable unless `reachable` and either no connection is required or one
        /// comes up by itself (on demand or on traffic, without intervention);
        /// reachable over cellular when `isWWAN`.
        public init(_ flags: SCNetworkReachabilityFlags) {
            self.init(ReachabilityStatus(flags: flags))
        }

        /// The status for AFNetworking's status value.
        public init(_ status: ReachabilityStatus) {
            switch status {
            case .unknown: self = .unknown
            case .notReachable: self = .notReachable
            case .reachableViaWWAN: self = .reachable(.cellular)
            case .reachableViaWiFi: self = .reachable(.ethernetOrWiFi)
            }
        }
    }

    /// Called with each status, on the queue given to `startListening`.
    public typealias Listener = @Sendable (NetworkReachabilityStatus) -> Void

    /// Where updates are handled before they go to the listener's queue (Alamofire's
    /// queue of the same name): work sent here runs after every update received so far.
    public let reachabilityQueue = DispatchQueue(label: "io.github.reachabilityd.reachabilityQueue")

    /// The internet's reachability, shared (`nil` only if the network cannot be watched at all).
    public static let `default` = NetworkReachabilityManager()

    /// What this manager watches.
    public let target: ReachabilityTarget
    /// Where its answers come from: the daemon when it is on the system bus, else
    /// in-process (or what was asked for). Waits for the bus's answer the first time.
    public var mode: ReachabilityMode {
        (try? chosenMode()) ?? .daemon
    }
    let key: FeedKey
    /// The mode asked for (`nil`: the daemon when it is on the system bus, else in-process).
    let requestedMode: ReachabilityMode?

    private struct Listening {
        let subscription: Subscription<FeedKey>
        /// For a name, until its first answer: what `flags` and `status` read meanwhile (the
        /// internet's, `readWithoutLookup`), so that the listener hears every change of what
        /// they say, not only those after the name is looked up.
        var beforeAnswer: Subscription<FeedKey>?
        let queue: DispatchQueue
        let listener: Listener
        var previousStatus: NetworkReachabilityStatus?
    }

    private let listening = Guarded<Listening?>(nil)
    private let error = Guarded<ReachabilityError?>(nil)
    /// Alamofire 4's `listener` and `listenerQueue` (`+Alamofire4.swift`).
    let alamofire4 = Guarded(Alamofire4Listening())

    /// Watches `target`. `mode` `nil` uses the daemon when it is on the system
    /// bus, else the in-process engine; with `.daemon` every answer fails while
    /// there is no daemon (`lastError` says why). Throws `.invalidTarget` for a
    /// bad host name or address (the same rules, and the same messages, as the
    /// daemon's). Returns at once: the bus is asked on the library's loop.
    public init(target: ReachabilityTarget = .internet, mode: ReachabilityMode? = nil) throws(ReachabilityError) {
        self.target = target
        key = try target.key()
        requestedMode = mode
        Self.choose(mode)
    }

    /// Watches `name` as Apple's `SCNetworkReachabilityCreateWithName` takes it:
    /// any string but the empty one (`nil`). A host name or address literal is
    /// watched as `init(target:mode:)` watches it; a string that is neither (a URL
    /// such as `"https://example.com"`) is not reachable once listening (before, it
    /// reads as the internet, as any name does: see `flags`), and `state.error` says
    /// why. Such a string is answered here, never sent to the daemon.
    public init?(name: String, mode: ReachabilityMode? = nil) {
        let target = ReachabilityTarget(name)
        guard let key = target.anyNameKey() else { return nil }
        self.target = target
        self.key = key
        requestedMode = mode
        Self.choose(mode)
    }

    /// Starts choosing where answers come from (once per process), on the loop, without waiting.
    private static func choose(_ mode: ReachabilityMode?) {
        Runtime.send { runtime in runtime.mode(mode) { _ in } }
    }

    /// The mode, or why no answer can come (`.daemon` asked, and no daemon on the bus).
    /// Waits for the bus's answer the first time.
    package func chosenMode() throws(ReachabilityError) -> ReachabilityMode {
        let requested = requestedMode
        return try Runtime.wait { runtime, done in runtime.mode(requested) { done($0) } }.get()
    }

    /// The internet's reachability; `nil` if the network cannot be watched at all.
    public convenience init?() {
        try? self.init(target: .internet)
    }

    /// The reachability of `host` (a name or an address literal); `nil` only for an
    /// empty string, as Alamofire's on Apple's `SCNetworkReachabilityCreateWithName`:
    /// see `init?(name:mode:)`.
    public convenience init?(host: String) {
        self.init(name: host)
    }

    deinit { stopListening() }

    // MARK: The current answer

    /// The full current state: the latest one while listening, else a fresh
    /// answer (which, for a host name not watched by anyone, waits for its lookup).
    /// Not Alamofire's: `flags` and `status` read without a lookup, as Alamofire's do.
    public var state: ReachabilityState {
        if let latest = listening.withLock({ $0?.subscription.latest }) { return latest }
        return fresh(key)
    }

    /// A fresh answer for `key`; `.unknown` (and `lastError` set) when none can come.
    private func fresh(_ key: FeedKey) -> ReachabilityState {
        let requested = requestedMode
        let result = Runtime.wait { runtime, done in runtime.query(key, mode: requested) { done($0) } }
        switch result {
        case .success(let state): return state
        case .failure(let failure):
            error.withLock { $0 = failure }
            return .unknown
        }
    }

    /// One fresh answer, without watching.
    public func query() async throws(ReachabilityError) -> ReachabilityState {
        let (key, requested) = (self.key, requestedMode)
        return try await Runtime.answer { runtime, done in runtime.query(key, mode: requested) { done($0) } }.get()
    }

    /// The flags, as Alamofire's reads them from Apple's `SCNetworkReachabilityGetFlags`:
    /// while listening, the latest answer; before one has come, or when not listening, a
    /// fresh one, for a host name without a lookup (the internet's, as Apple's: a name
    /// is looked up only once listening). `nil` while nothing is known.
    open var flags: SCNetworkReachabilityFlags? {
        if let latest = listening.withLock({ $0?.subscription.latest }) { return latest.flags }
        return fresh(key.readWithoutLookup).flags
    }

    /// The status of `flags`, by Alamofire's rule (`.unknown` while nothing is known).
    open var status: NetworkReachabilityStatus { flags.map(NetworkReachabilityStatus.init) ?? .unknown }

    /// Reachable at all, over cellular or otherwise.
    open var isReachable: Bool { isReachableOnCellular || isReachableOnEthernetOrWiFi }
    /// Reachable over mobile broadband.
    open var isReachableOnCellular: Bool { status == .reachable(.cellular) }
    /// Reachable over anything but mobile broadband.
    open var isReachableOnEthernetOrWiFi: Bool { status == .reachable(.ethernetOrWiFi) }

    /// Why the last watch or answer failed (the daemon's `TooManyTargets`, say).
    public var lastError: ReachabilityError? { error.withLock { $0 } }

    // MARK: Listening

    /// Calls `listener` on `queue` with the current status, then with each
    /// change of status, until `stopListening()`. Returns `false` when the
    /// target cannot be watched; `lastError` says why. `@preconcurrency` as
    /// Alamofire's: a Swift 5 program's listener may capture mutable state.
    @preconcurrency @discardableResult
    open func startListening(
        onQueue queue: DispatchQueue = .main, onUpdatePerforming listener: @escaping Listener
    ) -> Bool {
        stopListening()
        // Updates go through `reachabilityQueue` (the runtime hands them there), without
        // holding the manager there even for a moment (it may be going away on another thread).
        let id = Runtime.newID()
        let subscription = Subscription(id: id, key, mode: requestedMode, on: reachabilityQueue) {
            [weak self] result in
            switch result {
            case .success(let state): self?.notify(state, id: id)
            case .failure(let failure): self?.error.withLock { $0 = failure }
            }
        }
        // Alamofire 5 reads the flags at start and calls the listener with them, host
        // targets included (a name's own answer comes only once it is looked up): `flags`,
        // read before listening (a name's without a lookup), handed to `reachabilityQueue`
        // before the subscription starts, so it is the listener's first call.
        let atStart = flags
        let beforeAnswer = key.readWithoutLookup == key ? nil
            : Subscription(key.readWithoutLookup, mode: requestedMode, on: reachabilityQueue) { [weak self] result in
                if case .success(let state) = result { self?.notifyBeforeAnswer(state, id: id) }
            }
        listening.withLock {
            $0 = Listening(subscription: subscription, beforeAnswer: beforeAnswer, queue: queue, listener: listener)
        }
        if let atStart {
            reachabilityQueue.async { [weak self] in self?.notifyAtStart(atStart, id: id) }
        }
        guard let failure = subscription.startAndWait() else {
            beforeAnswer?.start()
            return true
        }
        error.withLock { $0 = failure }
        stopListening()
        return false
    }

    /// Stops the listener; the daemon's target is released once nobody in this process watches it.
    open func stopListening() {
        let subscriptions = listening.withLock { state -> [Subscription<FeedKey>] in
            defer { state = nil }
            return [state?.subscription, state?.beforeAnswer].compactMap { $0 }
        }
        // The runtime lets them go later, not inline: from `deinit` this may run on the loop thread
        // in the middle of delivering an update to the very feed it would close.
        for subscription in subscriptions { subscription.cancel() }
    }

    /// The listener's call at `startListening` (the first; later answers that repeat it are not).
    private func notifyAtStart(_ flags: SCNetworkReachabilityFlags, id: Int) {
        let status = NetworkReachabilityStatus(flags)
        listening.withLock { listening in
            guard listening?.subscription.id == id, listening!.previousStatus == nil else { return }
            listening!.previousStatus = status
            let listener = listening!.listener
            listening!.queue.async { listener(status) }
        }
    }

    /// The target's own answer; the first one ends `beforeAnswer`.
    private func notify(_ state: ReachabilityState, id: Int) {
        let beforeAnswer = listening.withLock { listening -> Subscription<FeedKey>? in
            guard listening?.subscription.id == id else { return nil }
            defer { listening!.beforeAnswer = nil }
            tell(NetworkReachabilityStatus(state.status), &listening!)
            return listening!.beforeAnswer
        }
        beforeAnswer?.cancel()
    }

    /// The internet's answer, for a name not answered yet (what `status` reads meanwhile).
    private func notifyBeforeAnswer(_ state: ReachabilityState, id: Int) {
        listening.withLock { listening in
            guard listening?.subscription.id == id, listening!.subscription.latest == nil else { return }
            tell(NetworkReachabilityStatus(state.status), &listening!)
        }
    }

    /// Calls the listener with `status` unless it was the last one it heard.
    private func tell(_ status: NetworkReachabilityStatus, _ listening: inout Listening) {
        guard listening.previousStatus != status else { return }
        listening.previousStatus = status
        let listener = listening.listener
        listening.queue.async { listener(status) }
    }

    // MARK: Async

    /// The current state, then every change of it (flags, interface,
    /// connectivity, addresses…), for as long as it is iterated.
    public var updates: ReachabilityUpdates { ReachabilityUpdates(key: key, mode: requestedMode) }

    /// Every target the daemon watches (for every client), with its state.
    public static func daemonTargets() async throws(ReachabilityError) -> [ReachabilitySnapshot] {
        try await Runtime.answer { runtime, done in runtime.daemonTargets { done($0) } }.get()
    }
}

/// The states of one target: the current one, then each change. Iterating
/// watches the target; ending the iteration (or its task) stops watching.
public struct ReachabilityUpdates: AsyncSequence, Sendable {
    public typealias Element = ReachabilityState
    public typealias Failure = ReachabilityError

    let key: FeedKey
    let mode: ReachabilityMode?

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncThrowingStream<ReachabilityState, any Error>.AsyncIterator

        public mutating func next() async throws(ReachabilityError) -> ReachabilityState? {
            do {
                return try await base.next()
            } catch let error as ReachabilityError {
                throw error
            } catch {
                throw .failed("\(error)")
            }
        }

        public mutating func next(isolation actor: isolated (any Actor)?) async throws(ReachabilityError)
            -> ReachabilityState?
        {
            do {
                return try await base.next(isolation: actor)
            } catch let error as ReachabilityError {
                throw error
            } catch {
                throw .failed("\(error)")
            }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        let (key, mode) = (self.key, self.mode)
        let stream = AsyncThrowingStream<ReachabilityState, any Error>(bufferingPolicy: .unbounded) { continuation in
            let subscription = Subscription(key, mode: mode, on: nil) { result in
                switch result {
                case .success(let state): continuation.yield(state)
                case .failure(let failure): continuation.finish(throwing: failure)
                }
            }
            subscription.start()
            continuation.onTermination = { _ in subscription.cancel() }
        }
        return AsyncIterator(base: stream.makeAsyncIterator())
    }
}
