import ReachabilityCore

/// What a path evaluation reads for `NetworkIdentity` and the invalidations: each family's
/// default route (the internet's, as the kernel answers it), its gateway's neighbour entry,
/// the link's prefixes, its Wi-Fi SSID (NetworkManager's active access point); the preferred
/// path's VPN; the DNS configuration.
extension PathEvaluation {
    func observe(_ state: PathState, _ facts: NetworkFacts, _ source: NetworkFactSource) -> NetworkIdentity.Observed {
        var routes: [NetworkIdentity.Route] = []
        var sources: [String] = []
        // A VPN's routes say nothing of the network under it: a VPN that comes or goes is
        // `vpn-changed`, not another network (the identity is "" while the VPN carries the route).
        let vpnLinks = Set(state.interfaces.filter(\.isVPN).map(\.name))
        for family in AddressFamily.allCases {
            guard let route = facts.internetRoutes[family]?.lazy.compactMap({ $0 }).first(where: { $0.kind == .unicast })
            else { continue }
            let link = route.interfaceIndex
            if let name = facts.links[link]?.name, vpnLinks.contains(name) { continue }
            var linkLayer: [UInt8]?
            if let gateway = route.gateway, let address = try? IPAddress(parsing: gateway) {
                let key = "\(link)/\(gateway)"
                linkLayer = source.neighbour(of: address, on: link) ?? linkLayers[key]
                if let linkLayer { linkLayers[key] = linkLayer }
            }
            let prefixes = (facts.addresses ?? [])
                .filter { $0.interfaceIndex == link && $0.family == family && $0.scope == .global }
                .compactMap(Self.prefix)
            routes.append(.init(family: family, link: facts.links[link]?.name ?? "\(link)", gateway: route.gateway,
                                gatewayLinkLayer: linkLayer, prefixes: prefixes))
            if let address = route.source { sources.append(address) }
        }
        // Bounded by the links and gateways in use now.
        if linkLayers.count > 64 { linkLayers = [:] }
        let ssid = ssids.ssid(links: routes.map(\.link), known: facts.devices.compactMapValues(\.ssid))
        let preferred = state.interfaces.first(where: \.isUsable)
        let addresses = Set((facts.addresses ?? []).filter { !$0.isDADFailed }.map(\.address))
        return NetworkIdentity.Observed(
            identity: NetworkIdentityKey.identity(of: NetworkIdentity.material(routes: routes, ssid: ssid)),
            vpn: preferred?.isVPN == true ? preferred?.name : nil, sources: sources, addresses: addresses,
            dns: source.dnsConfiguration())
    }

    /// "192.0.2.0/24" for 192.0.2.1 with a /24.
    static func prefix(_ address: AddressFact) -> String? {
        guard let parsed = try? IPAddress(parsing: address.address) else { return nil }
        let length = Int(address.prefixLength)
        let masked = parsed.bytes.enumerated().map { index, byte -> UInt8 in
            let bits = max(0, min(8, length - index * 8))
            return bits == 8 ? byte : byte & ~(UInt8(0xFF) >> bits)
        }
        return Netlink.addressText(masked).map { "\($0)/\(length)" }
    }
}
