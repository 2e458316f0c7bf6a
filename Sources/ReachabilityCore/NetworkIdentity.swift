/// What makes the network the default route leads to this network and not another with the
/// same addressing (docs/design.md, "The network under a connection"). Pure: the platform reads the
/// facts and hashes the material with its per-machine key.
///
/// The material is, for each family with a unicast default route: the family, the outgoing
/// link's on-link prefix(es), and the gateway's link-layer address (its neighbour entry: another
/// router behind the same IP address is another network) — or, for an on-link default route
/// (PPP, a tunnel), the link's name; and the Wi-Fi SSID of the routes' link (`SSIDs`): another
/// access point of the same SSID is the same network (a roam), another SSID another network
/// even with the same addressing. One identity for both
/// families: a dual-stack network is one network, and its IPv6 router is most often the same
/// box. No default route in either family: no network (`nil`, exported as "").
public enum NetworkIdentity {
    /// The default route of one family, as the identity sees it.
    public struct Route: Sendable, Hashable {
        public var family: AddressFamily
        /// The outgoing link's name.
        public var link: String
        /// The gateway's address literal; `nil` for an on-link default route.
        public var gateway: String?
        /// The gateway's link-layer address, when the neighbour table knows it.
        public var gatewayLinkLayer: [UInt8]?
        /// The link's prefixes of that family ("192.0.2.0/24"), global scope.
        public var prefixes: [String]

        public init(family: AddressFamily, link: String, gateway: String?, gatewayLinkLayer: [UInt8]?,
                    prefixes: [String]) {
            self.family = family
            self.link = link
            self.gateway = gateway
            self.gatewayLinkLayer = gatewayLinkLayer
            self.prefixes = prefixes
        }
    }

    /// The text to hash, canonical (sorted, one line per family); `nil` without a default route.
    public static func material(routes: [Route], ssid: [UInt8]? = nil) -> String? {
        guard !routes.isEmpty else { return nil }
        let lines = routes.map { route -> String in
            let family = route.family == .ipv4 ? "4" : "6"
            let next: String
            if route.gateway != nil {
                // The router's own address, not its IP: the same IP on another network is another router.
                next = route.gatewayLinkLayer.map { "mac=" + hex($0) } ?? "mac=?"
            } else {
                next = "onlink=" + route.link
            }
            return "\(family) \(next) prefixes=\(Set(route.prefixes).sorted().joined(separator: ","))"
        }.sorted()
        return ((ssid.map { ["ssid=" + hex($0)] } ?? []) + lines).joined(separator: "\n")
    }

    /// The Wi-Fi SSID the identity takes, and the one each Wi-Fi link was last seen on. A
    /// link's SSID is its active access point's; while it has none (between two access points
    /// of a roam, or NetworkManager already done with a connection whose routes the kernel
    /// still has) the link counts as still on the SSID it was last seen on, as a gateway whose
    /// neighbour entry is not resolved yet counts as the one it was: an SSID that is briefly
    /// unknown is no change of network, and only another SSID is.
    public struct SSIDs: Sendable, Hashable {
        /// The last SSID seen on each link, by link name.
        public private(set) var last: [String: [UInt8]] = [:]

        public init() {}

        /// The SSID of the first of `links` (the default routes' links, IPv4's first) that has
        /// one: `known` now (by link: the Wi-Fi devices with an active access point), else the
        /// one it was last seen on; `nil` when none has (wired, a modem, no NetworkManager).
        public mutating func ssid(links: [String], known: [String: [UInt8]]) -> [UInt8]? {
            for (link, ssid) in known where !ssid.isEmpty { last[link] = ssid }
            // Bounded by the Wi-Fi links in use now.
            if last.count > 64 { last = known.filter { !$0.value.isEmpty } }
            return links.compactMap { last[$0] }.first
        }
    }

    /// The network the default routes lead to, followed from one evaluation to the next, so
    /// that its identity is the network's and not the moment's: it stays the same while
    /// nothing says the network is another — through a gateway's neighbour entry resolving
    /// (or flushed with the carrier and resolved again), one family's default route going
    /// and coming back, and a replug or carrier loss back to the same network — and changes
    /// only on evidence of another network: another link-layer address behind a family's
    /// gateway, another on-link default route's link, prefixes that no longer overlap, another
    /// SSID. Pure; the platform reads the routes, asks the kernel to resolve a gateway it
    /// has no link-layer address of yet, and hashes the material.
    public struct Tracker: Sendable {
        /// What identified a family's way out: the gateway's link-layer address, or for an
        /// on-link default route (PPP, a tunnel) the link's name.
        public enum Anchor: Sendable, Hashable {
            case router([UInt8])
            case onLink(String)
        }

        /// One family's default route as an evaluation sees it.
        public struct Sighting: Sendable, Hashable {
            public var family: AddressFamily
            /// `nil` while the gateway's link-layer address is not known (not resolved yet).
            public var anchor: Anchor?
            /// The outgoing link's prefixes of that family ("192.0.2.0/24"), global scope.
            public var prefixes: Set<String>
            /// The outgoing link and its carrier count (`LinkFact.carrierChanges`): the same
            /// pair is the same unbroken segment, which cannot have become another network.
            public var segment: Segment

            public init(family: AddressFamily, anchor: Anchor?, prefixes: Set<String>, segment: Segment) {
                self.family = family
                self.anchor = anchor
                self.prefixes = prefixes
                self.segment = segment
            }
        }

        /// A link and its carrier count.
        public struct Segment: Sendable, Hashable {
            public var link: String
            public var carrierChanges: UInt32

            public init(link: String, carrierChanges: UInt32) {
                self.link = link
                self.carrierChanges = carrierChanges
            }
        }

        /// The network followed: its identity, and what is known of it (learnt as its
        /// gateways resolve and its families come).
        public struct Network: Sendable, Hashable {
            public var identity: String
            public var ssid: [UInt8]?
            public var anchors: [AddressFamily: Anchor] = [:]
            public var prefixes: [AddressFamily: Set<String>] = [:]
            public var segments: Set<Segment> = []
        }

        /// The network the routes lead to now, or last did (kept while there is none, so that
        /// one that comes back the same is the same).
        public private(set) var network: Network?

        public init() {}

        /// The identity of the network `sightings` (IPv4 first) lead to, with the Wi-Fi `ssid`
        /// of their links; `key` hashes the material. "" without a default route, and while
        /// a network seen for the first time is not identified yet: its first family's
        /// gateway has no link-layer address yet (the platform asks the kernel to resolve it).
        public mutating func identify(_ sightings: [Sighting], ssid: [UInt8]?, key: (String) -> String) -> String {
            guard !sightings.isEmpty else { return "" }
            if var known = network, !contradicts(known, sightings, ssid) {
                let agrees = sightings.contains { sighting in
                    sighting.anchor != nil && known.anchors[sighting.family] == sighting.anchor
                } || (ssid != nil && ssid == known.ssid) || sightings.contains { known.segments.contains($0.segment) }
                if agrees || sightings.allSatisfy({ $0.anchor == nil }) {
                    // The same network (or nothing known yet says otherwise): learn what is new.
                    Self.learn(sightings, ssid: ssid, into: &known)
                    network = known
                    return known.identity
                }
            }
            // Another network, or the first: named by its first family's way out, once known.
            guard let first = sightings.first, let anchor = first.anchor else { return "" }
            let route = Route(family: first.family, link: first.segment.link, gateway: nil, gatewayLinkLayer: nil,
                              prefixes: first.prefixes.sorted())
            var found = Network(identity: key(Self.material(anchor, route, ssid: ssid)), ssid: ssid)
            Self.learn(sightings, ssid: ssid, into: &found)
            network = found
            return found.identity
        }

        /// What `sightings` say that `network` cannot be: another SSID, another way out of a
        /// family (another router, another on-link link), prefixes of a family that no longer
        /// overlap.
        private func contradicts(_ network: Network, _ sightings: [Sighting], _ ssid: [UInt8]?) -> Bool {
            if let ssid, let known = network.ssid, ssid != known { return true }
            return sightings.contains { sighting in
                if let anchor = sighting.anchor, let known = network.anchors[sighting.family], anchor != known {
                    return true
                }
                guard let known = network.prefixes[sighting.family], !known.isEmpty, !sighting.prefixes.isEmpty
                else { return false }
                return known.isDisjoint(with: sighting.prefixes)
            }
        }

        private static func learn(_ sightings: [Sighting], ssid: [UInt8]?, into network: inout Network) {
            if let ssid { network.ssid = ssid }
            for sighting in sightings {
                if let anchor = sighting.anchor { network.anchors[sighting.family] = anchor }
                if !sighting.prefixes.isEmpty { network.prefixes[sighting.family] = sighting.prefixes }
            }
            network.segments = Set(sightings.map(\.segment))
        }

        private static func material(_ anchor: Anchor, _ route: Route, ssid: [UInt8]?) -> String {
            var route = route
            switch anchor {
            case .router(let linkLayer):
                route.gateway = ""
                route.gatewayLinkLayer = linkLayer
            case .onLink(let link):
                route.link = link
            }
            return NetworkIdentity.material(routes: [route], ssid: ssid) ?? ""
        }
    }

    public static func hexDigits(_ bytes: [UInt8]) -> String { hex(bytes) }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xF)]] })
    }

    /// Why a connection made before may be broken, from one path evaluation to the next
    /// (`nil`: nothing). One reason per evaluation, the weightiest: another network, a VPN
    /// that came or went on the path, a source address connections were made from that is
    /// gone, another DNS configuration. A network that goes and comes back the same (a flap:
    /// identity → "" → identity) is no change, nor are the name servers that go and come
    /// with it; one that comes back another is. Another
    /// preferred source is no change while the one before stays on its link (a privacy
    /// address rotating: the older one, deprecated, still carries the connections made from
    /// it until its valid lifetime ends); its removal is.
    public static func invalidation(from old: Observed, to new: Observed, lastNetwork: String) -> InvalidationReason? {
        if !new.identity.isEmpty && !lastNetwork.isEmpty && new.identity != lastNetwork { return .networkChanged }
        if old.vpn != new.vpn { return .vpnChanged }
        if !new.sources.isEmpty && old.inUse.contains(where: { !new.addresses.contains($0) }) { return .sourceChanged }
        // Other name servers on a network: not none for a while (NetworkManager's configuration
        // goes with the connection in a flap and comes back, in steps), only other ones.
        if !new.identity.isEmpty && !new.dns.isEmpty && !old.lastDNS.isEmpty && new.dns != old.lastDNS {
            return .dnsChanged
        }
        return nil
    }

    /// `new` with what it carries over from the evaluation before (`previous`): the source
    /// addresses connections may have been made from (its preferred sources, and those of
    /// before still on a link; bounded by the links' addresses), and the last name servers
    /// a network had.
    public static func carried(from previous: Observed?, into new: Observed) -> Observed {
        var new = new
        let before = previous?.inUse ?? []
        new.inUse = new.sources + before.filter { new.addresses.contains($0) && !new.sources.contains($0) }
        new.lastDNS = !new.identity.isEmpty && !new.dns.isEmpty ? new.dns : previous?.lastDNS ?? ""
        return new
    }

    /// What one path evaluation saw that an invalidation compares.
    public struct Observed: Sendable, Hashable {
        /// The identity ("" without a default route).
        public var identity: String
        /// The VPN link the preferred path goes through, `nil` when none.
        public var vpn: String?
        /// The default routes' preferred source addresses (IPv4 first); empty without one.
        public var sources: [String]
        /// The source addresses connections may have been made from (`NetworkIdentity.inUse`):
        /// the preferred ones, and the earlier ones still on a link.
        public var inUse: [String]
        /// Every address on the links (but those duplicate address detection failed): what a
        /// connection can still be bound to.
        public var addresses: Set<String>
        /// The DNS configuration in a comparable form.
        public var dns: String
        /// The last DNS configuration with a name server that a network had (`carried`).
        public var lastDNS: String

        public init(identity: String = "", vpn: String? = nil, sources: [String] = [], addresses: Set<String>? = nil,
                    dns: String = "") {
            self.identity = identity
            self.vpn = vpn
            self.sources = sources
            self.inUse = sources
            self.addresses = addresses ?? Set(sources)
            self.dns = dns
            self.lastDNS = identity.isEmpty ? "" : dns
        }
    }
}
