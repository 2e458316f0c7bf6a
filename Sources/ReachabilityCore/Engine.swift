/// The flag rules of the specification, each written once.
///
/// `evaluatePath` turns the kernel's answer for one destination plus the
/// device facts into flags (`isVPN` and `hasUnderlay`: a tunnel needs a way
/// out); `choose` ranks several paths as Apple does; `applyActivation` adds
/// what NetworkManager's pending activations mean when nothing is reachable.
/// `evaluateInternet` composes them for the internet target: `internetPath`
/// picks each family's path from the kernel's answers for several destinations,
/// and a captive portal holds for the whole target.
public enum Engine {
    /// One evaluated path (one address, or one family's way to the internet).
    public struct Path: Sendable, Hashable {
        public var family: AddressFamily
        public var flags: ReachabilityFlags
        public var interface: String
        public var interfaceType: InterfaceType
        public var connectivity: Connectivity
        public var isMetered: Bool
        public var isVPN: Bool

        public static func unreachable(_ family: AddressFamily) -> Path {
            Path(
                family: family, flags: [], interface: "", interfaceType: .none, connectivity: .unknown,
                isMetered: false, isVPN: false)
        }

        /// Apple's ranking: reachable without ConnectionRequired, then reachable with it, then not reachable.
        public var rank: Int {
            guard flags.contains(.reachable) else { return 0 }
            return flags.contains(.connectionRequired) ? 1 : 2
        }
    }

    /// Flags for one destination whose route the kernel gave as `route`.
    public static func evaluatePath(
        family: AddressFamily, route: RouteFact?, facts: NetworkFacts
    ) -> Path {
        guard let route, route.kind != .unusable,
            let link = facts.links[route.interfaceIndex], link.isUsable
        else { return .unreachable(family) }

        var flags: ReachabilityFlags = .reachable
        switch route.kind {
        case .local: flags.formUnion([.isLocalAddress, .isDirect])
        case .unicast where !route.hasGateway: flags.insert(.isDirect)
        case .unicast, .unusable: break
        }

        let device = facts.devices[link.name]
        let type = (device?.type).flatMap { $0 == .other ? nil : $0 } ?? link.kernelType
        if type == .wwan { flags.insert(.isWWAN) }

        let isVPN = Self.isVPN(link, facts: facts)
        if isVPN {
            // A tunnel needs an underlay: without one its packets go nowhere.
            guard hasUnderlay(facts) else { return .unreachable(family) }
            flags.insert(.transientConnection)
        }

        let connectivity = device?.connectivity(family) ?? .unknown
        if route.hasGateway && connectivity == .portal {
            flags.formUnion([.connectionRequired, .interventionRequired])
        }

        return Path(
            family: family, flags: flags, interface: link.name, interfaceType: type,
            connectivity: connectivity, isMetered: device?.isMetered ?? false, isVPN: isVPN)
    }

    /// The link belongs to a VPN: a NetworkManager VPN or tunnel device, or a
    /// tunnel link (tun, WireGuard, PPP, IP tunnels).
    public static func isVPN(_ link: LinkFact, facts: NetworkFacts) -> Bool {
        (facts.devices[link.name]?.isVPN ?? false) || link.isTunnel
    }

    /// A tunnel needs an underlay: a path through a VPN counts as reachable only
    /// while a link that is not a VPN can carry the tunnel's packets off the
    /// machine: it is usable (up, carrier) and has a route off the link (through
    /// a gateway, or a point-to-point link's own route). That route need not be
    /// a default route: openconnect's vpnc-script and OpenVPN without `def1`
    /// replace the default route with the tunnel's and keep only a host route to
    /// the VPN server through the old gateway, and such a VPN works. A full
    /// tunnel whose Wi-Fi went away has none. True when `facts.underlayLinks`
    /// was not asked (`nil`).
    public static func hasUnderlay(_ facts: NetworkFacts) -> Bool {
        guard let underlays = facts.underlayLinks else { return true }
        return underlays.contains { index in
            guard let link = facts.links[index] else { return false }
            return link.isUsable && link.kernelType != .loopback && !isVPN(link, facts: facts)
        }
    }

    /// The best-ranked path; ties go to the earlier one (resolver order).
    public static func choose(_ paths: [Path]) -> Path? {
        var best: Path?
        for path in paths where best == nil || path.rank > best!.rank {
            best = path
        }
        return best
    }

    /// When nothing is reachable: NetworkManager activating a connection means
    /// `ConnectionRequired`; a device waiting for secrets adds `InterventionRequired`.
    public static func applyActivation(to flags: ReachabilityFlags, facts: NetworkFacts) -> ReachabilityFlags {
        guard !flags.contains(.reachable) else { return flags }
        let activities = facts.devices.values.map(\.activity)
        if activities.contains(.needsAuthentication) {
            return flags.union([.connectionRequired, .interventionRequired])
        }
        if activities.contains(.activating) {
            return flags.union(.connectionRequired)
        }
        return flags
    }

    /// The internet target (Apple's `reachabilityForInternetConnection`, address 0.0.0.0):
    /// per family, the paths the kernel gives packets to the internet destinations
    /// (`internetPath`). It never carries `IsDirect` or `IsLocalAddress`.
    ///
    /// Captive portal, one story: while NetworkManager's global connectivity is
    /// `portal`, every path gets `ConnectionRequired` and `InterventionRequired`,
    /// so whichever family ranks best the target is not reachable (Status 0), and
    /// `Connectivity`, `Flags`, `Status`, `ReachableIPv4` and `ReachableIPv6`
    /// never disagree: no "online" beside a login page.
    public static func evaluateInternet(_ facts: NetworkFacts) -> TargetState {
        guard facts.backend != .none else { return .unknown }
        return state(from: internetPaths(facts), facts: facts, connectivity: facts.connectivity)
    }

    /// One family's path to the internet, from the kernel's answers for each of
    /// its internet destinations. The internet is routed only when most
    /// destinations have a route (a host route that covers one of them, with no
    /// default route, does not speak for the internet); then the best-ranked path
    /// among them, and among equally ranked ones the path most destinations take
    /// (a split tunnel or a lab route that covers one destination does not speak
    /// for the internet either); ties go to the destination asked first. Without
    /// `IsDirect` and `IsLocalAddress`.
    public static func internetPath(family: AddressFamily, facts: NetworkFacts) -> Path {
        let routes = facts.internetRoutes[family] ?? []
        let routed = routes.filter { $0.map { $0.kind != .unusable } ?? false }
        guard routed.count * 2 > routes.count else { return .unreachable(family) }
        let paths = routed.map { route in
            var path = evaluatePath(family: family, route: route, facts: facts)
            path.flags.subtract([.isDirect, .isLocalAddress])
            return path
        }
        guard let topRank = paths.map(\.rank).max() else { return .unreachable(family) }
        var best: (path: Path, count: Int)?
        for path in paths where path.rank == topRank {
            let count = paths.lazy.filter { $0 == path }.count
            if best == nil || count > best!.count { best = (path, count) }
        }
        return best!.path
    }

    /// Both families' internet paths, with a captive portal holding for the whole target.
    static func internetPaths(_ facts: NetworkFacts) -> [Path] {
        AddressFamily.allCases.map { family in
            var path = internetPath(family: family, facts: facts)
            if facts.connectivity == .portal {
                path.flags.formUnion([.connectionRequired, .interventionRequired])
            }
            return path
        }
    }

    /// Composes evaluated paths into a target's state.
    static func state(
        from paths: [Path], facts: NetworkFacts, connectivity: Connectivity? = nil, addresses: [String] = []
    ) -> TargetState {
        let best = choose(paths) ?? .unreachable(.ipv4)
        let flags = applyActivation(to: best.flags, facts: facts)
        let reachable = best.rank > 0
        func familyReachable(_ family: AddressFamily) -> Bool {
            paths.contains { $0.family == family && ReachabilityStatus(flags: $0.flags).isReachable }
        }
        return TargetState(
            flags: flags,
            interface: reachable ? best.interface : "",
            interfaceType: reachable ? best.interfaceType : .none,
            addresses: addresses,
            connectivity: connectivity ?? best.connectivity,
            isMetered: reachable && best.isMetered,
            isVPN: reachable && best.isVPN,
            reachableIPv4: familyReachable(.ipv4),
            reachableIPv6: familyReachable(.ipv6))
    }
}

extension Engine {
    /// One resolved (or literal) address and the kernel's route for it.
    public struct AddressRoute: Sendable, Hashable {
        public var address: String
        public var family: AddressFamily
        public var route: RouteFact?
        public init(address: String, family: AddressFamily, route: RouteFact?) {
            self.address = address
            self.family = family
            self.route = route
        }
    }

    /// A host, address or address-pair target: every address evaluated, the best-ranked one
    /// decides (ties: resolver order), as in Apple's implementation.
    public static func evaluateAddresses(_ routes: [AddressRoute], facts: NetworkFacts) -> TargetState {
        guard facts.backend != .none else {
            return TargetState(flags: nil, addresses: routes.map(\.address))
        }
        let paths = routes.map { evaluatePath(family: $0.family, route: $0.route, facts: facts) }
        return state(from: paths, facts: facts, addresses: routes.map(\.address))
    }

    /// An address pair with only a local address: reachable (`IsLocalAddress`,
    /// `IsDirect`) while the address is configured on a link that can carry
    /// packets (`link`, its index; `nil` when no link has it), as a `local` route
    /// through that link would be.
    public static func evaluateLocal(_ address: String, family: AddressFamily, link: Int32?,
                                     facts: NetworkFacts) -> TargetState {
        let route = link.map { RouteFact(kind: .local, hasGateway: false, interfaceIndex: $0) }
        return evaluateAddresses([AddressRoute(address: address, family: family, route: route)], facts: facts)
    }

    /// A host whose name could not be resolved: not reachable (flags 0, without
    /// activation flags: the name is the problem), with the resolver's message.
    public static func resolutionFailed(_ message: String, facts: NetworkFacts) -> TargetState {
        guard facts.backend != .none else { return TargetState(flags: nil, error: message) }
        return TargetState(flags: [], error: message)
    }
}
