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
        /// Why the path is not reachable (`nil` when it is): the first rule that failed.
        public var cause: Cause?

        public static func unreachable(_ family: AddressFamily, _ cause: Cause? = nil) -> Path {
            Path(
                family: family, flags: [], interface: "", interfaceType: .none, connectivity: .unknown,
                isMetered: false, isVPN: false, cause: cause)
        }

        /// Apple's ranking: reachable without ConnectionRequired, then reachable with it, then not reachable.
        public var rank: Int {
            guard flags.contains(.reachable) else { return 0 }
            return flags.contains(.connectionRequired) ? 1 : 2
        }
    }

    /// Flags for one destination whose route the kernel gave as `route`;
    /// `destination` is its literal (`nil`: an internet destination, global).
    /// Each rule that fails says why (`Path.cause`), in the order the table reads.
    public static func evaluatePath(
        family: AddressFamily, route: RouteFact?, facts: NetworkFacts, destination: String? = nil
    ) -> Path {
        let to = destination.map { " to \($0)" } ?? " to the internet over \(family.name)"
        if let destination, AddressText.isUnscopedIPv6LinkLocal(destination) {
            return .unreachable(family, Cause(.noRoute, "no route a socket can take to \(destination): "
                + "a link-local address needs its link (\(destination)%INTERFACE)"))
        }
        guard let route else { return .unreachable(family, Cause(.noRoute, "no route\(to)")) }
        guard route.kind != .unusable else {
            return .unreachable(family, Cause(.rejected, "the route\(to) is \(route.rejection ?? "unusable")"))
        }
        guard let link = facts.links[route.interfaceIndex] else {
            return .unreachable(family, Cause(.noRoute, "no route\(to) (its link is gone)"))
        }
        guard link.isUp else { return .unreachable(family, Cause(.linkDown, "\(link.name) is down")) }
        guard link.isUsable else { return .unreachable(family, Cause(.noCarrier, "no carrier on \(link.name)")) }
        guard route.kind == .local || !link.lacksNeighbourResolution else {
            return .unreachable(family, Cause(.noNeighbour, "ARP is off on \(link.name)"))
        }
        if let cause = sourceCause(family: family, route: route, destination: destination, facts: facts) {
            return .unreachable(family, cause)
        }
        // The caller's packets, not the route: a gateway that answers nobody carries nothing.
        if route.kind == .unicast, route.hasGateway, route.nextHopFailed {
            return .unreachable(family, Cause(.gatewayUnreachable, "the gateway \(route.gateway ?? "") does not "
                + "answer on \(link.name) (its neighbour entry failed)"))
        }

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
            guard hasUnderlay(facts) else {
                return .unreachable(family, Cause(.noUnderlay, "no link carries the packets of \(link.name)"))
            }
            flags.insert(.transientConnection)
        }

        let connectivity = device?.connectivity(family) ?? .unknown
        var cause: Cause?
        if route.hasGateway && connectivity == .portal {
            flags.formUnion([.connectionRequired, .interventionRequired])
            cause = Cause(.portal, "a captive portal on \(link.name)")
        }

        return Path(
            family: family, flags: flags, interface: link.name, interfaceType: type,
            connectivity: connectivity, isMetered: device?.isMetered ?? false, isVPN: isVPN, cause: cause)
    }

    /// The source rule: a unicast route counts only when the kernel's answer carries
    /// a source address a packet can leave with. For a destination that is not
    /// link-local, the source must be neither missing (IPv4 without an address),
    /// nor link-local (`fe80::/10`, `169.254/16`), nor loopback (the kernel answers
    /// `::1` when every address of the link is tentative), nor tentative (unless
    /// optimistic) or DAD-failed. `nil` when the source may send, for a `local`
    /// route, and when `facts.addresses` was not read.
    public static func sourceCause(
        family: AddressFamily, route: RouteFact, destination: String?, facts: NetworkFacts
    ) -> Cause? {
        guard route.kind == .unicast, let addresses = facts.addresses else { return nil }
        let linkName = facts.links[route.interfaceIndex]?.name ?? "its link"
        // The addresses of the family on the route's link that may not send, and why.
        let blocked = addresses.filter {
            $0.family == family && $0.interfaceIndex == route.interfaceIndex && $0.scope == .global && !$0.maySend
        }
        let why = blocked.isEmpty ? "" : " (" + blocked.map { "\($0.address) is \($0.state ?? "")" }
            .joined(separator: ", ") + ")"
        guard let source = route.source, !AddressText.isUnspecified(source) else {
            return Cause(.noSourceAddress, "no \(family.name) address to send from through \(linkName)\(why)")
        }
        if let destination, AddressText.isLinkLocal(destination) { return nil }
        if AddressText.isLinkLocal(source) || AddressText.isLoopback(source) {
            return Cause(.noSourceAddress,
                         "only \(source) to send from through \(linkName), which no router forwards\(why)")
        }
        if let fact = addresses.first(where: { $0.address == source }), let state = fact.state {
            return Cause(.noSourceAddress, "the source address \(source) on \(linkName) is \(state)")
        }
        return nil
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
        guard routed.count * 2 > routes.count else {
            // The cause of the destinations that are not routed (the first one asked).
            let unrouted = routes.first { $0.map { $0.kind == .unusable } ?? true } ?? nil
            return evaluatePath(family: family, route: unrouted, facts: facts)
        }
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
                if path.flags.contains(.reachable) { path.cause = Cause(.portal, "a captive portal stands in the way") }
            }
            return path
        }
    }

    /// Composes evaluated paths into a target's state.
    static func state(
        from paths: [Path], facts: NetworkFacts, connectivity: Connectivity? = nil, addresses: [String] = []
    ) -> TargetState {
        let best = choose(paths) ?? .unreachable(.ipv4, Cause(.noRoute, "no address to evaluate"))
        let flags = applyActivation(to: best.flags, facts: facts)
        let reachable = best.rank > 0
        func familyReachable(_ family: AddressFamily) -> Bool {
            paths.contains { $0.family == family && ReachabilityStatus(flags: $0.flags).isReachable }
        }
        let cause = ReachabilityStatus(flags: flags).isReachable ? nil
            : activationCause(flags: best.flags, facts: facts) ?? (best.rank > 0 ? best.cause : nil) ?? deepestCause(paths)
        return TargetState(
            flags: flags,
            interface: reachable ? best.interface : "",
            interfaceType: reachable ? best.interfaceType : .none,
            addresses: addresses,
            connectivity: connectivity ?? best.connectivity,
            isMetered: reachable && best.isMetered,
            isVPN: reachable && best.isVPN,
            reachableIPv4: familyReachable(.ipv4),
            reachableIPv6: familyReachable(.ipv6),
            reason: cause?.reason, error: cause?.detail ?? "")
    }

    /// The cause `applyActivation` adds to a path that is not reachable: a device
    /// waiting for secrets, or a connection being activated.
    static func activationCause(flags: ReachabilityFlags, facts: NetworkFacts) -> Cause? {
        guard !flags.contains(.reachable) else { return nil }
        let devices = facts.devices.values.sorted { $0.interface < $1.interface }
        if let device = devices.first(where: { $0.activity == .needsAuthentication }) {
            return Cause(.needsAuth, "\(device.interface) waits for secrets")
        }
        if let device = devices.first(where: { $0.activity == .activating }) {
            return Cause(.connecting, "\(device.interface) is connecting")
        }
        return nil
    }

    /// Among the causes of paths that are not reachable, the one that got furthest
    /// (`Reason.depth`); ties go to the earlier path.
    static func deepestCause(_ paths: [Path]) -> Cause? {
        var best: Cause?
        for cause in paths.compactMap(\.cause) where best == nil || cause.reason.depth > best!.reason.depth {
            best = cause
        }
        return best
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
        let paths = routes.map { evaluatePath(family: $0.family, route: $0.route, facts: facts, destination: $0.address) }
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
        return TargetState(flags: [], reason: .lookupFailed, error: message)
    }
}
