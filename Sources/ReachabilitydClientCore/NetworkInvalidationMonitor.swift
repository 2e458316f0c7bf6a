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
    private let id: Int

    public init(queue: DispatchQueue = .main, handler: @escaping @Sendable (NetworkInvalidationReason) -> Void) {
        id = PathUpdates.subscribeInvalidations { reason in queue.async { handler(reason) } }
    }

    /// Stops the events: none is delivered after one already on its way to the queue.
    public func cancel() { PathUpdates.unsubscribe(id) }

    deinit { cancel() }
}
