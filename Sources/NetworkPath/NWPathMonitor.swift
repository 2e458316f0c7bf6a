// Re-exported, as Apple's Network does: code that imports Network alone names
// DispatchQueue for `start(queue:)`.
@_exported import Dispatch
import ReachabilityRuntime
import ReachabilityCore

/// Watches the network's paths and reports each change, with the Network
/// framework's names and behaviour, for Linux.
///
/// ```swift
/// let monitor = NWPathMonitor(requiredInterfaceType: .wifi)
/// monitor.pathUpdateHandler = { path in print(path.status) }
/// monitor.start(queue: .main)
/// ```
///
/// The facts come from `reachabilityd` when it is on the system bus (one
/// evaluation shared by every program), else from the same engine running in
/// this process — the choice of the runtime the client products share. After `start(queue:)`
/// the handler gets the current path at once, then a new path each time one
/// of its facts changes; never the same path twice in a row (a path on another
/// network behind the same addressing, another router or another Wi-Fi SSID, is a
/// new path even when every member is the same, as Apple's monitor delivers one on
/// a gateway change; a roam within one SSID is not). A monitor is
/// started once: after `cancel()` it reports nothing more.
///
/// A started monitor lives until `cancel()`, as Apple's does (its update handling
/// holds it): one kept only in a `weak var` keeps reporting, and is freed once
/// cancelled and no one else holds it.
public final class NWPathMonitor: Sendable, CustomDebugStringConvertible {
    private let requirement: PathRequirement
    private let source: PathSource
    private let shared = Guarded(Shared())

    /// Everything that changes, under `shared`'s lock.
    private struct Shared {
        var handler: (@Sendable (NWPath) -> Void)?
        var queue: DispatchQueue?
        var current = NWPath.unsatisfied
        /// The path feed's subscription, from `start` to `cancel`.
        var subscription: Subscription<PathKey>?
        var isStarted = false
        var isCancelled = false
        /// Whether the first path was handed to the queue.
        var reported = false
    }

    /// A monitor for every interface type.
    public convenience init() {
        self.init(.any)
    }

    /// A monitor whose path uses only interfaces of `requiredInterfaceType`: it is
    /// satisfied only by a usable route over such an interface.
    public convenience init(requiredInterfaceType: NWInterface.InterfaceType) {
        self.init(PathRequirement(required: requiredInterfaceType))
    }

    /// A monitor whose path never uses interfaces of these types (nor a tunnel over one).
    public convenience init(prohibitedInterfaceTypes: [NWInterface.InterfaceType]) {
        self.init(PathRequirement(prohibited: Set(prohibitedInterfaceTypes)))
    }

    /// A monitor on any source of facts (the tests give a fake one).
    init(_ requirement: PathRequirement, source: PathSource = .system) {
        self.requirement = requirement
        self.source = source
    }

    deinit {
        shared.withLock { $0.subscription }?.cancel()
    }

    /// Called on the monitor's queue with each new path. Set it before `start(queue:)`.
    @preconcurrency public var pathUpdateHandler: (@Sendable (_ newPath: NWPath) -> Void)? {
        get { shared.withLock { $0.handler } }
        set { shared.withLock { $0.handler = newValue } }
    }

    /// The latest path (unsatisfied, with no interface, until the first answer after `start`).
    public var currentPath: NWPath { shared.withLock { $0.current } }

    /// The queue given to `start(queue:)`; `nil` before.
    public var queue: DispatchQueue? { shared.withLock { $0.queue } }

    /// Starts watching; each path goes to `pathUpdateHandler` on `queue`, the
    /// current one first. A second call, or one after `cancel()`, does nothing.
    public func start(queue: DispatchQueue) {
        let begins = shared.withLock { shared -> Bool in
            guard !shared.isStarted, !shared.isCancelled else { return false }
            shared.isStarted = true
            shared.queue = queue
            return true
        }
        guard begins else { return }
        // Outside the lock: the first path may arrive before `subscribe` returns.
        // The subscription holds the monitor strongly until `cancel()` cancels it:
        // Apple's started monitor lives on without its caller's reference.
        let requirement = self.requirement
        let subscription = source.subscribe { result in
            self.received(NWPath(result, requirement: requirement))
        }
        let cancelled = shared.withLock { shared -> Bool in
            if !shared.isCancelled { shared.subscription = subscription }
            return shared.isCancelled
        }
        if cancelled { subscription.cancel() }
    }

    /// Stops watching for good: no handler call starts after this returns (one
    /// already running on the queue finishes), as with the library's other clients.
    public func cancel() {
        let subscription = shared.withLock { shared in
            shared.isCancelled = true
            defer { shared.subscription = nil }
            return shared.subscription
        }
        subscription?.cancel()
    }

    /// What the monitor watches and its state, for logs (Apple prints its own form).
    public var debugDescription: String {
        let state = shared.withLock { $0.isCancelled ? "cancelled" : $0.isStarted ? "started" : "not started" }
        return "NWPathMonitor(\(requirement.debugDescription), \(state), path: \(currentPath.debugDescription))"
    }

    private func received(_ path: NWPath) {
        shared.withLock { shared in
            guard shared.isStarted, !shared.isCancelled, let queue = shared.queue else { return }
            // The first answer is always reported, even when it equals the initial path.
            guard path != shared.current || !shared.reported else { return }
            shared.current = path
            shared.reported = true
            queue.async { [weak self] in
                guard let self, let handler = self.shared.withLock({ $0.isCancelled ? nil : $0.handler }) else { return }
                handler(path)
            }
        }
    }
}

/// Every path the network takes, as an asynchronous sequence: the current one
/// first, then each change. Iterating watches the network by itself (the
/// monitor's handler and queue play no part); ending the iteration, or its
/// task, stops watching.
extension NWPathMonitor: AsyncSequence {
    public typealias Element = NWPath
    public typealias Failure = Never

    public struct Iterator: AsyncIteratorProtocol {
        public typealias Element = NWPath
        public typealias Failure = Never

        var base: AsyncStream<NWPath>.Iterator

        public mutating func next() async -> NWPath? { await base.next() }

        public mutating func next(isolation actor: isolated (any Actor)?) async -> NWPath? {
            await base.next(isolation: actor)
        }
    }

    public func makeAsyncIterator() -> Iterator {
        let (requirement, source) = (self.requirement, self.source)
        let stream = AsyncStream<NWPath>(bufferingPolicy: .unbounded) { continuation in
            let latest = Guarded<NWPath?>(nil)
            let subscription = source.subscribe { result in
                let path = NWPath(result, requirement: requirement)
                let isNew = latest.withLock { latest in
                    defer { latest = path }
                    return latest != path
                }
                if isNew { continuation.yield(path) }
            }
            continuation.onTermination = { _ in subscription.cancel() }
        }
        return Iterator(base: stream.makeAsyncIterator())
    }
}

/// Where a monitor's facts come from: the library's runtime (the daemon or the
/// in-process engine), or a fake feed in the tests.
struct PathSource: Sendable {
    /// A started subscription to the paths (`PathKey`), its handler called on the library's
    /// thread with the current paths once known, then each change; a monitor cancels it.
    let subscribe: @Sendable (@escaping Subscription<PathKey>.Handler) -> Subscription<PathKey>

    static let system = PathSource { handler in
        let subscription = Subscription(PathKey(), mode: nil, on: nil, handler)
        subscription.start()
        return subscription
    }
}

extension NWPath {
    /// The path of a monitor with `requirement` from a path feed's update; without one
    /// (nothing can watch the network here), unsatisfied.
    init(_ update: Result<PathUpdate, ReachabilityError>, requirement: PathRequirement) {
        let state = (try? update.get().path) ?? .none
        self = NWPath(state, requirement: requirement).after(state.invalidations)
    }
}
