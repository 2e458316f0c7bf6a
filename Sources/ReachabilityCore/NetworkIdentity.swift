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

    public static func hexDigits(_ bytes: [UInt8]) -> String { hex(bytes) }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xF)]] })
    }

    /// Why a connection made before may be broken, from one path evaluation to the next
    /// (`nil`: nothing). One reason per evaluation, the weightiest: another network, a VPN
    /// that came or went on the path, a source address connections were made from that is
    /// gone, another DNS configuration. A network that goes and comes back the same (a flap:
    /// identity → "" → identity) is no change; one that comes back another is. Another
    /// preferred source is no change while the one before stays on its link (a privacy
    /// address rotating: the older one, deprecated, still carries the connections made from
    /// it until its valid lifetime ends); its removal is.
    public static func invalidation(from old: Observed, to new: Observed, lastNetwork: String) -> InvalidationReason? {
        if !new.identity.isEmpty && !lastNetwork.isEmpty && new.identity != lastNetwork { return .networkChanged }
        if old.vpn != new.vpn { return .vpnChanged }
        if !new.sources.isEmpty && old.inUse.contains(where: { !new.addresses.contains($0) }) { return .sourceChanged }
        if old.dns != new.dns { return .dnsChanged }
        return nil
    }

    /// The source addresses connections may have been made from as of `new`: its preferred
    /// sources, and those of before (`previous`, the last evaluation's) still on a link.
    /// Bounded by the links' addresses.
    public static func inUse(previous: [String], new: Observed) -> [String] {
        new.sources + previous.filter { new.addresses.contains($0) && !new.sources.contains($0) }
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

        public init(identity: String = "", vpn: String? = nil, sources: [String] = [], addresses: Set<String>? = nil,
                    dns: String = "") {
            self.identity = identity
            self.vpn = vpn
            self.sources = sources
            self.inUse = sources
            self.addresses = addresses ?? Set(sources)
            self.dns = dns
        }
    }
}
