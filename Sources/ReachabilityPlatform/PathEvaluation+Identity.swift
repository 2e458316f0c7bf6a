import ReachabilityCore

/// What a path evaluation reads for `NetworkIdentity` (`NetworkIdentity.Tracker`) and the
/// invalidations: each family's default route (the internet's, as the kernel answers it), its
/// gateway's neighbour entry, the link's prefixes and carrier count, its Wi-Fi SSID
/// (NetworkManager's active access point); the preferred path's VPN; the DNS configuration.
extension PathEvaluation {
    func observe(_ state: PathState, _ facts: NetworkFacts, _ source: NetworkFactSource) -> NetworkIdentity.Observed {
        var sightings: [NetworkIdentity.Tracker.Sighting] = []
        var sources: [String] = []
        // A VPN's routes say nothing of the network under it: a VPN that comes or goes is
        // `vpn-changed`, not another network (the identity is "" while the VPN carries the route).
        let vpnLinks = Set(state.interfaces.filter(\.isVPN).map(\.name))
        for family in AddressFamily.allCases {
            guard let route = facts.internetRoutes[family]?.lazy.compactMap({ $0 }).first(where: { $0.kind == .unicast })
            else { continue }
            let link = route.interfaceIndex
            let name = facts.links[link]?.name ?? "\(link)"
            if vpnLinks.contains(name) { continue }
            var anchor: NetworkIdentity.Tracker.Anchor? = .onLink(name)
            if let gateway = route.gateway, let address = try? IPAddress(parsing: gateway) {
                // Not resolved yet: the kernel was asked to when the route was (`NetworkObserver`).
                anchor = source.neighbour(of: address, on: link).map { .router($0) }
            }
            let prefixes = (facts.addresses ?? [])
                .filter { $0.interfaceIndex == link && $0.family == family && $0.scope == .global }
                .compactMap(Self.prefix)
            sightings.append(.init(family: family, anchor: anchor, prefixes: Set(prefixes),
                                   segment: .init(link: name, carrierChanges: facts.links[link]?.carrierChanges ?? 0)))
            if let address = route.source { sources.append(address) }
        }
        let ssid = ssids.ssid(links: sightings.map(\.segment.link), known: facts.devices.compactMapValues(\.ssid))
        let preferred = state.interfaces.first(where: \.isUsable)
        let addresses = Set((facts.addresses ?? []).filter { !$0.isDADFailed }.map(\.address))
        return NetworkIdentity.Observed(
            identity: tracker.identify(sightings, ssid: ssid, key: NetworkIdentityKey.identity(of:)),
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
