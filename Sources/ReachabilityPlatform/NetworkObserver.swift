import CNetworkManager
import ReachabilityBus
import ReachabilityCore

/// Watches the network through every source (libnm, rtnetlink) and reports a
/// change once per burst: all events of one main-loop iteration lead to one
/// `onChange` call, in an idle callback, with no artificial delay.
public final class NetworkObserver {
    private let netlink: Netlink
    private var monitor: NetlinkMonitor?
    private var networkManager: NetworkManagerBackend?
    private var pending: SourceHandle?
    private let onChange: () -> Void

    public init(onChange: @escaping () -> Void) throws(NetlinkError) {
        self.onChange = onChange
        netlink = try Netlink()
        monitor = try NetlinkMonitor { [unowned self] in self.scheduleChange() }
        networkManager = NetworkManagerBackend { [unowned self] in self.scheduleChange() }
    }

    /// Coalesces: the idle callback runs after every pending event source.
    private func scheduleChange() {
        guard pending == nil else { return }
        pending = Sources.idle(priority: G_PRIORITY_DEFAULT_IDLE) { [unowned self] in
            self.pending = nil
            self.onChange()
        }
    }

    /// Reads the current facts: NetworkManager's (from libnm's cache) and the
    /// kernel's links and default routes (fresh netlink dumps).
    public func facts() -> NetworkFacts {
        guard let nm = networkManager?.facts() else { return .unknown }
        do {
            let links = try netlink.links()
            var routes: [AddressFamily: RouteFact] = [:]
            for family in AddressFamily.allCases {
                routes[family] = try netlink.defaultRoute(family, links: links)
            }
            return NetworkFacts(backend: .networkManager, connectivity: nm.connectivity, devices: nm.devices,
                                links: links, defaultRoutes: routes)
        } catch {
            Log.error("cannot read the kernel's routes: \(error)")
            return NetworkFacts(backend: .networkManager, connectivity: nm.connectivity, devices: nm.devices)
        }
    }
}
