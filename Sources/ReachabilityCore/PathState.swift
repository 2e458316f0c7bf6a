/// The paths to the internet, per interface: what the `…Reachability1.Path`
/// interface exports and Network-framework-style clients (`NWPath`) read.
/// Backends compute it; it travels over the bus unchanged.

/// One interface a path may use (an entry of `Interfaces`).
public struct PathInterface: Sendable, Hashable {
    /// The kernel's name ("wlan0").
    public var name: String
    /// The kernel's interface index.
    public var index: Int32
    /// wifi, ethernet, wwan, bluetooth or other (never loopback: it is not listed).
    public var type: InterfaceType
    /// A VPN or tunnel interface.
    public var isVPN: Bool
    /// The kernel has a route to the internet for IPv4 packets bound to this interface,
    /// the interface is up with carrier, and a tunnel has an underlay.
    public var usableIPv4: Bool
    /// The same for IPv6.
    public var usableIPv6: Bool
    /// The next hops of those routes (address literals, IPv4 first); empty when on-link.
    public var gateways: [String]

    public init(name: String, index: Int32, type: InterfaceType, isVPN: Bool = false, usableIPv4: Bool = false,
                usableIPv6: Bool = false, gateways: [String] = []) {
        self.name = name
        self.index = index
        self.type = type
        self.isVPN = isVPN
        self.usableIPv4 = usableIPv4
        self.usableIPv6 = usableIPv6
        self.gateways = gateways
    }

    /// A path leaves through this interface over some family.
    public var isUsable: Bool { usableIPv4 || usableIPv6 }
}

/// Every fact of the `Path` interface.
public struct PathState: Sendable, Hashable {
    /// In order of preference: the interfaces the kernel's lookup for the internet
    /// chooses first, then the other usable ones by route metric, then the unusable.
    public var interfaces: [PathInterface]
    /// The internet target's flags.
    public var flags: ReachabilityFlags
    /// A name server is configured (NetworkManager's DNS configuration, else resolv.conf).
    public var dnsConfigured: Bool
    /// The preferred interface is metered (`yes` or `guess-yes`) or a modem.
    public var isExpensive: Bool
    /// The preferred interface's connection is metered `yes` by the user's own setting.
    public var isConstrained: Bool
    /// The preferred interface's link quality (`Engine.linkQuality`).
    public var linkQuality: LinkQuality
    /// Why the internet is not reachable (the internet target's `reason`); `nil` when it is.
    public var reason: Reason?
    /// The network the default route leads to, opaque and keyed per machine
    /// (`NetworkIdentity`); "" without a default route.
    public var networkIdentity = ""
    /// How many times a client's path feed saw the default route lead to another network
    /// (`networkIdentity`; not a flap back to the same): a path after that is a new path even
    /// when nothing else differs (Apple's NWPathMonitor delivers a new path on a gateway
    /// change). The daemon does not export it; the client runtime counts.
    public var invalidations: UInt64 = 0

    public init(interfaces: [PathInterface] = [], flags: ReachabilityFlags = [], dnsConfigured: Bool = false,
                isExpensive: Bool = false, isConstrained: Bool = false, linkQuality: LinkQuality = .unknown,
                reason: Reason? = nil) {
        self.reason = reason
        self.linkQuality = linkQuality
        self.interfaces = interfaces
        self.flags = flags
        self.dnsConfigured = dnsConfigured
        self.isExpensive = isExpensive
        self.isConstrained = isConstrained
    }

    /// Nothing known yet, or no interface at all.
    public static let none = PathState()

    /// The path in a few words, for the log: "usable: eth0 (IPv4, IPv6), wlan0 (IPv4)",
    /// "no usable interface (no-carrier)".
    public var summary: String {
        let usable = interfaces.filter(\.isUsable).map { entry in
            let families = [entry.usableIPv4 ? "IPv4" : nil, entry.usableIPv6 ? "IPv6" : nil].compactMap { $0 }
            return "\(entry.name) (\(families.joined(separator: ", ")))"
        }
        if usable.isEmpty { return "no usable interface" + (reason.map { " (\($0.rawValue))" } ?? "") }
        return "usable: " + usable.joined(separator: ", ")
    }
}
