import CGLib
import Logging
import ReachabilityCore
import ReachabilityLoop

/// Which source of device facts to use.
public enum BackendMode: String, CaseIterable, Sendable {
    /// NetworkManager while it runs, the kernel otherwise; switches live.
    case auto
    /// NetworkManager only: nothing is known (Status -1) while it does not run.
    case networkManager = "networkmanager"
    /// The kernel only (rtnetlink and sysfs); NetworkManager is not read.
    case kernel
}

/// Watches the network through every source (libnm, rtnetlink, the resolver's
/// configuration file) and reports a change once per burst: all events of one
/// main-loop iteration lead to one `onChange` call, in an idle callback, with no
/// artificial delay.
@LoopActor
public final class NetworkObserver: NetworkFactSource {
    public let mode: BackendMode
    let netlink: Netlink
    private var monitor: NetlinkMonitor?
    private var networkManager: NetworkManagerBackend?
    /// Changes of the resolver's configuration file: names may resolve otherwise.
    private var resolverWatch: ResolverConfigurationWatch?
    /// Changes of the hosts file and of the name service switch's: names may resolve otherwise,
    /// whoever gives the DNS configuration.
    private var namesWatch: ResolverConfigurationWatch?
    private var pending: SourceHandle?
    /// Route answers made stale by kernel events since the last `takeRouteInvalidation()`.
    private var pendingInvalidation = RouteInvalidation(all: true)
    /// The gateways' verdicts (`marked`).
    private var nextHops = NextHopVerdicts()
    /// The links as of the last facts read: their carrier counts and whether they can carry packets.
    private var links: [Int32: LinkFact] = [:]
    /// NetworkManager answers for another network namespace (`NetworkManagerNamespace`), as of
    /// the last facts read: while it does, the kernel's facts and the resolver's file are used.
    private var foreignNetworkManager = false
    /// How TCP connections end, and what that says of the way out, while followed
    /// (`followConnectionOutcomes`).
    var connectionOutcomes: ConnectionOutcomeMonitor?
    var upstream: UpstreamEvidence?
    private let onChange: () -> Void
    let logger: Logger

    /// Starts watching; `onChange` after each burst of changes. Every part logs to `logger`;
    /// a source that cannot be read (NetworkManager not reachable, a call to ModemManager
    /// that failed) at `failureLevel`: `warning` in the daemon, whose administrator should
    /// hear of it, `info` in a library (swift-log's rule: a library logs at `info` or below).
    public init(mode: BackendMode, logger: Logger, failureLevel: Logger.Level,
                onChange: @escaping () -> Void) throws(NetlinkError) {
        self.mode = mode
        self.onChange = onChange
        self.logger = logger
        netlink = try Netlink()
        monitor = try NetlinkMonitor(logger: logger) { [unowned self] invalidation in
            self.pendingInvalidation.formUnion(invalidation)
            self.scheduleChange()
        }
        if let links = try? netlink.links() { monitor?.seed(links) }
        if mode != .kernel {
            // The client's creation (or its failure) triggers the first evaluation.
            networkManager = NetworkManagerBackend(logger: logger, failureLevel: failureLevel) { [unowned self] in self.scheduleChange() }
        } else {
            // Nothing else would: the kernel's facts are there now.
            scheduleChange()
        }
        resolverWatch = ResolverConfigurationWatch(paths: [Self.resolverConfigurationPath]) { [unowned self] in
            // While NetworkManager's facts are used, its own DNS configuration says so instead.
            if self.usedNetworkManager?.isRunning != true { self.scheduleChange() }
        }
        namesWatch = ResolverConfigurationWatch(paths: Self.nameSourcePaths) { [unowned self] in self.scheduleChange() }
    }

    /// The kernel answers at once; NetworkManager once libnm's client is made or failed
    /// (`auto` would otherwise read the kernel's facts first and switch a moment later).
    public var hasFirstAnswer: Bool { networkManager?.hasFirstAnswer ?? true }

    /// Coalesces: the idle callback runs after every pending event source.
    private func scheduleChange() {
        guard pending == nil else { return }
        pending = Sources.idle(priority: G_PRIORITY_DEFAULT_IDLE) { [unowned self] in
            self.pending = nil
            self.onChange()
        }
    }

    /// The route answers kernel events have made stale since the last call, the
    /// events still queued on the monitor's socket included: read before the facts
    /// and the routes of an evaluation, so that its cached answers and its fresh
    /// lookups (the links', the path's bound routes) see the same kernel.
    public func takeRouteInvalidation() -> RouteInvalidation {
        if let queued = monitor?.readQueued() { pendingInvalidation.formUnion(queued) }
        defer { pendingInvalidation = RouteInvalidation() }
        return pendingInvalidation
    }

    /// Reads the current facts: NetworkManager's (from libnm's cache) when it is
    /// used and running, and the kernel's links (a fresh netlink dump). Without
    /// NetworkManager, the kernel alone: `Connectivity` unknown, nothing metered,
    /// interface types from ARPHRD and sysfs. The routes to the internet are the
    /// evaluator's to ask (`routes(to:)`), like every other destination's.
    public func facts() -> NetworkFacts {
        var nm = networkManager?.facts()
        if nm == nil && mode == .networkManager { return .unknown }
        var facts = NetworkFacts(backend: .kernel)
        do {
            facts.links = try netlink.links()
            links = facts.links
            facts.addresses = try netlink.addresses()
        } catch {
            logger.error("cannot read the kernel's links and addresses: \(error)")
        }
        if let devices = nm?.devices, mode == .auto {
            noteNamespace(foreign: NetworkManagerNamespace.isForeign(
                deviceInterfaces: devices.keys, linkNames: Set(facts.links.values.map(\.name))))
            if foreignNetworkManager { nm = nil }
        }
        if let nm {
            facts.backend = .networkManager
            facts.connectivity = nm.connectivity
            facts.devices = nm.devices
        }
        updateConnectionOutcomes()
        return facts
    }

    /// NetworkManager while it is used: running, and (`auto`) speaking of this namespace's links.
    var usedNetworkManager: NetworkManagerBackend? {
        mode == .kernel || foreignNetworkManager ? nil : networkManager
    }

    private func noteNamespace(foreign: Bool) {
        guard foreign != foreignNetworkManager else { return }
        foreignNetworkManager = foreign
        if foreign {
            logger.info("""
                NetworkManager speaks of another network namespace (none of its devices is a link here, \
                and a link here is none of its devices): the kernel's facts are used, and the resolver's \
                configuration file
                """)
        } else {
            logger.info("NetworkManager speaks of this network namespace again: its facts are used")
        }
    }
}

extension NetworkObserver {
    /// Name resolution is configured: NetworkManager's DNS configuration has a name
    /// server while it is used and running; otherwise the system's resolver file
    /// names one. Read when asked (after a change; a change of either is one).
    public func dnsConfigured() -> Bool {
        if let configured = usedNetworkManager?.dnsConfigured { return configured }
        guard let text = Sysfs.read(Self.resolverConfigurationPath, limit: 65536) else { return false }
        return Engine.hasNameServer(resolverConfiguration: text)
    }

    /// The resolver configuration file of glibc and musl.
    static let resolverConfigurationPath = "/etc/resolv.conf"
    /// The other files `getaddrinfo` reads on each lookup: the hosts file, and which sources
    /// the name service switch asks (glibc reads it again once it has changed).
    static let nameSourcePaths = [HostsFile.path, HostsFile.nameServicePath]

    /// The kernel's routes to `addresses` (`nil`: no route, or netlink failed, which is logged).
    public func routes(to addresses: [IPAddress]) -> [RouteFact?] {
        asked("look up routes", or: addresses.map { _ in nil }) { () throws(NetlinkError) in
            marked(try netlink.routes(to: addresses))
        }
    }

    /// The kernel's routes to `addresses` for packets of `uid` (`RTA_UID`).
    public func routes(to addresses: [IPAddress], uid: UserID) -> [RouteFact?] {
        asked("look up routes", or: addresses.map { _ in nil }) { () throws(NetlinkError) in
            marked(try netlink.routes(to: addresses, uid: uid))
        }
    }

    /// The kernel's routes from each local address to each remote one for packets of `uid`.
    public func routes(pairs: [(local: IPAddress, remote: IPAddress)], uid: UserID) -> [RouteFact?] {
        asked("look up routes", or: pairs.map { _ in nil }) { () throws(NetlinkError) in
            marked(try netlink.routes(pairs: pairs, uid: uid))
        }
    }

    /// The routing policy's uid rules (a rule dump).
    public func uidRules() -> UIDRules {
        asked("read the routing rules", or: UIDRules()) { () throws(NetlinkError) in try netlink.uidRules() }
    }

    /// The kernel's routes to each address for packets bound to its link.
    public func routes(bound queries: [(address: IPAddress, interface: Int32)]) -> [RouteFact?] {
        asked("look up routes", or: queries.map { _ in nil }) { () throws(NetlinkError) in
            marked(try netlink.routes(bound: queries))
        }
    }

    /// The kernel's routes from each local address to each remote one.
    public func routes(pairs: [(local: IPAddress, remote: IPAddress)]) -> [RouteFact?] {
        asked("look up routes", or: pairs.map { _ in nil }) { () throws(NetlinkError) in
            marked(try netlink.routes(pairs: pairs))
        }
    }

    /// The link `address` is configured on (an address dump).
    public func link(holding address: IPAddress) -> Int32? {
        asked("read the addresses", or: nil) { () throws(NetlinkError) in try netlink.link(holding: address) }
    }

    /// The links the unicast routes of every table leave through (a route dump).
    public func routedLinks() -> (viaGateway: Set<Int32>, onLink: Set<Int32>) {
        asked("read the routing tables", or: ([], [])) { () throws(NetlinkError) in try netlink.routedLinks() }
    }

    /// `question`'s answer, or `fallback` when netlink failed (logged: "cannot \(what)").
    private func asked<T>(_ what: String, or fallback: T, _ question: () throws(NetlinkError) -> T) -> T {
        do {
            return try question()
        } catch {
            logger.error("cannot \(what): \(error)")
            return fallback
        }
    }

    public func follow(gateways: Set<String>) {
        monitor?.follow(gateways: gateways)
    }

    /// `routes` with each gateway's verdict (`RouteFact.nextHopFailed`, `NextHopVerdicts`): its
    /// neighbour entry is read once per distinct gateway and link, and one the verdicts say to
    /// resolve is resolved (`resolve`). The gateways of the routes are followed
    /// (`follow(gateways:)`): their neighbour events ask the answers again.
    private func marked(_ routes: [RouteFact?]) -> [RouteFact?] {
        var verdicts: [NextHopVerdicts.Key: Bool] = [:]
        var result = routes
        for (index, route) in routes.enumerated() {
            guard let route, route.kind == .unicast, route.hasGateway, let gateway = route.gateway else { continue }
            let key = NextHopVerdicts.Key(address: gateway, link: route.interfaceIndex)
            if verdicts[key] == nil, let address = try? IPAddress(parsing: gateway) {
                // An entry that cannot be read says nothing: the route's answer stands without it.
                guard let entry = try? netlink.neighbourEntry(of: address, on: route.interfaceIndex) else {
                    verdicts[key] = false
                    continue
                }
                let link = links[route.interfaceIndex]
                let verdict = nextHops.observe(key, state: entry.state, carrier: link?.carrierChanges ?? 0,
                                               linkUsable: link?.isUsable ?? true)
                if verdict.resolve { resolve(address, on: route.interfaceIndex) }
                verdicts[key] = verdict.failed
            }
            result[index]?.nextHopFailed = verdicts[key] ?? false
        }
        return result
    }

    public func neighbour(of address: IPAddress, on link: Int32) -> [UInt8]? {
        asked("read the neighbour entry of \(address)", or: nil) { () throws(NetlinkError) in
            try netlink.neighbour(of: address, on: link)
        }
    }

    /// NetworkManager's DNS configuration while it is used and running (`dnsServers`), else
    /// the resolver file's name servers, search domains and options.
    public func dnsConfiguration() -> String {
        if let servers = usedNetworkManager?.dnsServers { return servers }
        let text = Sysfs.read(Self.resolverConfigurationPath, limit: 65536) ?? ""
        return text.split(separator: "\n").filter { line in
            ["nameserver", "search", "domain", "options"].contains { line.hasPrefix($0) }
        }.joined(separator: "\n")
    }
}
