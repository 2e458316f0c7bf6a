/// The rules of the `Path` interface (`PathState`), each written once.
///
/// `evaluatePaths` lists every link but loopback with its type and, per
/// family, whether the kernel has a route to the internet for packets bound
/// to it (`BoundRoutes`); it orders them as the contract says and derives
/// `Expensive`, `Constrained` and `LinkQuality` (`linkQuality`) from the preferred one. `hasNameServer`
/// reads a resolver configuration file's text.
extension Engine {
    /// The kernel's answers for one link: the routing-table entry a packet to
    /// the family's first internet destination would match if bound to the link
    /// (`RTM_GETROUTE` with `RTA_OIF` and `RTM_F_FIB_MATCH`), `nil` where none.
    public struct BoundRoutes: Sendable, Hashable {
        public var ipv4: RouteFact?
        public var ipv6: RouteFact?

        public init(ipv4: RouteFact? = nil, ipv6: RouteFact? = nil) {
            self.ipv4 = ipv4
            self.ipv6 = ipv6
        }

        public subscript(family: AddressFamily) -> RouteFact? {
            family == .ipv4 ? ipv4 : ipv6
        }
    }

    /// The `Path` interface's facts. A link's family is usable when the internet
    /// can be reached over that family at all (the internet target's path for it,
    /// so the two objects never disagree), the link can carry packets (up,
    /// carrier), a tunnel has an underlay (`hasUnderlay`), and the kernel has a
    /// unicast route to the internet through it (bound lookup), or the internet
    /// target's own path for that family leaves through it.
    /// Order: the internet target's interface, then the other family's internet
    /// interface, then the other usable links by their lowest route metric, then
    /// the unusable ones (each by kernel index on ties). `dnsConfigured` is the
    /// caller's (NetworkManager's DNS configuration, or the resolver file).
    public static func evaluatePaths(
        _ facts: NetworkFacts, bound: [Int32: BoundRoutes], dnsConfigured: Bool
    ) -> PathState {
        guard facts.backend != .none else { return .none }
        let internet = evaluateInternet(facts)
        let underlay = hasUnderlay(facts)
        var internetInterfaces: [AddressFamily: String] = [:]
        for family in AddressFamily.allCases {
            let path = internetPath(family: family, facts: facts)
            if ReachabilityStatus(flags: path.flags).isReachable { internetInterfaces[family] = path.interface }
        }

        var entries: [(interface: PathInterface, metric: UInt32)] = []
        for link in facts.links.values where link.kernelType != .loopback {
            let device = facts.devices[link.name]
            let type = (device?.type).flatMap { $0 == .other || $0 == .loopback ? nil : $0 } ?? link.kernelType
            let isVPN = Self.isVPN(link, facts: facts)
            let canCarry = link.isUsable && (!isVPN || underlay)
            var entry = PathInterface(name: link.name, index: link.index, type: type, isVPN: isVPN)
            var metric = UInt32.max
            var gateways: [String] = []
            for family in AddressFamily.allCases {
                let route = bound[link.index]?[family]
                let routed = route.map { $0.kind == .unicast } ?? false
                // One answer per family: no link carries a family the internet target
                // cannot reach over (a bound lookup does not see the rules and routes that
                // send the family's packets elsewhere, or nowhere).
                let usable = canCarry && internetInterfaces[family] != nil
                    && (routed || internetInterfaces[family] == link.name)
                    && hasSendingAddress(family, facts: facts)
                if family == .ipv4 { entry.usableIPv4 = usable } else { entry.usableIPv6 = usable }
                guard usable, let route, routed else { continue }
                metric = min(metric, route.metric)
                if let gateway = route.gateway, !gateways.contains(gateway) { gateways.append(gateway) }
            }
            entry.gateways = gateways
            entries.append((entry, metric))
        }

        func rank(_ entry: PathInterface) -> Int {
            if internet.isReachable && entry.name == internet.interface { return 0 }
            if internetInterfaces.values.contains(entry.name) && entry.isUsable { return 1 }
            return entry.isUsable ? 2 : 3
        }
        entries.sort { a, b in
            let (ra, rb) = (rank(a.interface), rank(b.interface))
            if ra != rb { return ra < rb }
            if ra == 2 && a.metric != b.metric { return a.metric < b.metric }
            return a.interface.index < b.interface.index
        }
        let interfaces = entries.map(\.interface)
        let preferred = interfaces.first(where: \.isUsable)
        let device = preferred.flatMap { facts.devices[$0.name] }
        return PathState(
            interfaces: interfaces,
            flags: internet.exportedFlags,
            dnsConfigured: dnsConfigured,
            isExpensive: preferred.map { $0.type == .wwan || device?.isMetered == true } ?? false,
            isConstrained: device?.isMeteredByUser ?? false,
            linkQuality: linkQuality(of: preferred, device: device),
            reason: internet.reason)
    }

    /// The source rule for a bound lookup, whose answer names no source: some link
    /// but loopback (the kernel takes a source from any link when the outgoing one
    /// has none) has an address of the family that is global (or unique-local) and
    /// may send (`AddressFact.maySend`). True when `facts.addresses` was not read.
    static func hasSendingAddress(_ family: AddressFamily, facts: NetworkFacts) -> Bool {
        guard let addresses = facts.addresses else { return true }
        return addresses.contains { address in
            address.family == family && address.scope == .global && address.maySend
                && facts.links[address.interfaceIndex].map { $0.kernelType != .loopback } ?? false
        }
    }

    /// A resolver configuration file (`resolv.conf(5)`) names a name server: a
    /// `nameserver` keyword followed by an address, comments (`#`, `;`) ignored.
    public static func hasNameServer(resolverConfiguration text: String) -> Bool {
        text.split(whereSeparator: \.isNewline).contains { line in
            let words = line.prefix { $0 != "#" && $0 != ";" }.split(whereSeparator: { $0 == " " || $0 == "\t" })
            return words.count >= 2 && words[0] == "nameserver"
        }
    }
}
