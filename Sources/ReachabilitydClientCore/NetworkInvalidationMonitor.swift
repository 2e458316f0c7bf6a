import Dispatch
import ReachabilityCore
import ReachabilityRuntime

/// Why a connection made before may be broken although reachability may be unchanged:
/// `resumed`, `networkChanged`, `vpnChanged`, `sourceChanged`, `dnsChanged`.
public typealias NetworkInvalidationReason = ReachabilityCore.InvalidationReason

/// Tells when connections made before may be broken although `status` and `flags` may be the
/// same — the machine resumed from sleep, the default route leads to another network (another
/// router behind the same address), a VPN came or went, the source address or the DNS
/// configuration changed — so that long-lived connections (VPNs, WebSockets, MQTT) are checked
/// or made again. The daemon's `Path.Invalidated`, or the same engine's in-process. Once per
/// event, on `queue`, until `cancel()` (or the monitor goes).
public final class NetworkInvalidationMonitor: Sendable {
    /// The path feed's subscription: each update that counts a new invalidation is one event.
    private let subscription: Subscription<PathKey>

    public init(queue: DispatchQueue = .main, handler: @escaping @Sendable (NetworkInvalidationReason) -> Void) {
        // The first update is the current one: the invalidations it counts came before.
        let seen = Guarded<Int?>(nil)
        subscription = Subscription(PathKey(), mode: nil, on: queue) { result in
            guard case .success(let update) = result else { return }
            let isNew = seen.withLock { seen in
                defer { seen = update.invalidationCount }
                return seen.map { update.invalidationCount > $0 } ?? false
            }
            if isNew, let reason = update.lastInvalidation { handler(reason) }
        }
        subscription.start()
    }

    /// Stops the events: none is delivered after this returns (one already running finishes).
    public func cancel() { subscription.cancel() }

    deinit { cancel() }
}
