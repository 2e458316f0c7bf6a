/// The network facts an evaluation reads: what a backend saw, as plain values.
/// Backends build these; the engine never learns where they came from.

public enum AddressFamily: Sendable, Hashable, CaseIterable {
    case ipv4, ipv6
}

/// The type of an interface, as exported in `InterfaceType`.
public enum InterfaceType: String, Sendable, Hashable {
    case wifi, ethernet, wwan, bluetooth, loopback, other
    /// No route, so no interface.
    case none = ""
}

/// NetworkManager's connectivity check result, as exported in `Connectivity`.
public enum Connectivity: String, Sendable, Hashable {
    case unknown, none, portal, limited, full
}

/// Which backend produced the facts, as exported in `Backend`.
public enum BackendKind: String, Sendable, Hashable {
    case none
    case networkManager = "networkmanager"
    case kernel
}

/// What the kernel says about one destination (`RTM_GETROUTE`).
public struct RouteFact: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// The destination is this host's (route type `local`, loopback included).
        case local
        /// A unicast route, on-link or through a gateway.
        case unicast
        /// `unreachable`, `prohibit`, `blackhole` or `throw`: packets cannot leave.
        case unusable
    }

    public var kind: Kind
    public var hasGateway: Bool
    public var interfaceIndex: Int32
    /// The next hop's address literal (`RTA_GATEWAY`, `RTA_VIA`, or the first
    /// next hop of a multipath route); `nil` for an on-link route.
    public var gateway: String?
    /// The route's metric (`RTA_PRIORITY`; 0 when the kernel gives none).
    public var metric: UInt32
    /// How long the kernel goes on using the routing entry, in milliseconds, when it
    /// has a lifetime (`RTA_CACHEINFO` expiry: an IPv6 route learnt from a router
    /// advertisement); `nil` when it has none.
    public var lifetime: UInt32?
    /// The source address the kernel chose for the packet (`RTA_PREFSRC`, or the
    /// source the lookup was given), as a literal; `nil` when the answer has none
    /// (IPv4 without any address). `Engine.sourceCause` judges it.
    public var source: String?
    /// For an `unusable` route, its type in words: "unreachable", "prohibit",
    /// "blackhole" or "throw".
    public var rejection: String?
    /// The next hop (`gateway`) does not answer on its link: the kernel's neighbour entry
    /// for it failed and has not been resolved since (the platform keeps that verdict
    /// through the entry's new attempts, `INCOMPLETE`, until one succeeds).
    public var nextHopFailed = false

    public init(
        kind: Kind, hasGateway: Bool, interfaceIndex: Int32, gateway: String? = nil, metric: UInt32 = 0,
        lifetime: UInt32? = nil, source: String? = nil, rejection: String? = nil
    ) {
        self.source = source
        self.rejection = rejection
        self.kind = kind
        self.hasGateway = hasGateway
        self.interfaceIndex = interfaceIndex
        self.gateway = gateway
        self.metric = metric
        self.lifetime = lifetime
    }
}

/// A kernel link (`RTM_NEWLINK`).
public struct LinkFact: Sendable, Hashable {
    public enum OperState: Sendable, Hashable { case up, unknown, down }

    public var index: Int32
    public var name: String
    /// `IFF_UP`.
    public var isUp: Bool
    /// `IFF_LOWER_UP` (carrier).
    public var hasCarrier: Bool
    public var operState: OperState
    /// The type the kernel alone tells (ARPHRD, sysfs DEVTYPE).
    public var kernelType: InterfaceType
    /// tun/tap, WireGuard, PPP and other point-to-point links.
    public var isTunnel: Bool
    /// `IFF_POINTOPOINT`: whatever is routed through the link leaves the machine.
    public var isPointToPoint: Bool
    /// `IFF_NOARP`: the kernel resolves no neighbour (ARP, IPv6 ND) on the link.
    public var hasNoARP: Bool
    /// The link's group (`IFLA_GROUP`, `ip link set X group N`): rules select by it.
    public var group: UInt32
    /// The link's master's index (`IFLA_MASTER`: a bridge, bond or VRF), 0 when none.
    public var master: Int32
    /// How many times the link's carrier came or went since it was made
    /// (`IFLA_CARRIER_CHANGES`): the same count means the same unbroken segment.
    public var carrierChanges: UInt32

    public init(
        index: Int32, name: String, isUp: Bool, hasCarrier: Bool, operState: OperState,
        kernelType: InterfaceType, isTunnel: Bool, isPointToPoint: Bool = false, group: UInt32 = 0, master: Int32 = 0,
        hasNoARP: Bool = false, carrierChanges: UInt32 = 0
    ) {
        self.carrierChanges = carrierChanges
        self.hasNoARP = hasNoARP
        self.group = group
        self.master = master
        self.isPointToPoint = isPointToPoint
        self.index = index
        self.name = name
        self.isUp = isUp
        self.hasCarrier = hasCarrier
        self.operState = operState
        self.kernelType = kernelType
        self.isTunnel = isTunnel
    }

    /// Packets can leave through this link: up, with carrier, operstate up or unknown.
    public var isUsable: Bool { isUp && hasCarrier && operState != .down }

    /// A broadcast link with ARP off: the kernel resolves no next hop on it (new
    /// neighbour entries are `NUD_NOARP` with the link's own address), so nothing
    /// routed through it arrives. Point-to-point links, tunnels and loopback need
    /// no neighbour.
    public var lacksNeighbourResolution: Bool {
        hasNoARP && !isPointToPoint && !isTunnel && kernelType != .loopback
    }
}

/// One address configured on a link (`RTM_NEWADDR`), with what decides whether
/// packets may leave with it.
public struct AddressFact: Sendable, Hashable {
    /// The kernel's scope of the address (`ifa_scope`).
    public enum Scope: Sendable, Hashable { case global, site, link, host }

    /// The literal (canonical, without a scope).
    public var address: String
    public var family: AddressFamily
    public var interfaceIndex: Int32
    public var scope: Scope
    /// `IFA_F_TENTATIVE`: duplicate address detection is still running.
    public var isTentative: Bool
    /// `IFA_F_DADFAILED`: another host has it.
    public var isDADFailed: Bool
    /// `IFA_F_OPTIMISTIC`: tentative, but allowed to send (RFC 4429).
    public var isOptimistic: Bool

    /// The on-link prefix's length (`ifa_prefixlen`).
    public var prefixLength: UInt8

    public init(address: String, family: AddressFamily, interfaceIndex: Int32, scope: Scope = .global,
                isTentative: Bool = false, isDADFailed: Bool = false, isOptimistic: Bool = false,
                prefixLength: UInt8 = 0) {
        self.prefixLength = prefixLength
        self.address = address
        self.family = family
        self.interfaceIndex = interfaceIndex
        self.scope = scope
        self.isTentative = isTentative
        self.isDADFailed = isDADFailed
        self.isOptimistic = isOptimistic
    }

    /// Packets may leave with it: not DAD-failed, and not tentative unless optimistic.
    public var maySend: Bool { !isDADFailed && (!isTentative || isOptimistic) }

    /// Why it may not send, in words ("tentative", "DAD-failed"); `nil` when it may.
    public var state: String? {
        if isDADFailed { return "DAD-failed" }
        if isTentative && !isOptimistic { return "tentative" }
        return nil
    }
}

/// A NetworkManager device, reduced to what the flags need.
public struct DeviceFact: Sendable, Hashable {
    public enum Activity: Sendable, Hashable {
        /// Not connected and not trying (unmanaged, unavailable, disconnected, failed, deactivating).
        case idle
        /// Preparing, configuring, getting an IP configuration, checking it.
        case activating
        /// Waiting for secrets (`need-auth`).
        case needsAuthentication
        case activated
    }

    /// The IP interface (`nm_device_get_ip_iface`), matched against the route's link.
    public var interface: String
    public var type: InterfaceType
    public var activity: Activity
    /// A VPN connection or a tunnel device (WireGuard, tun, PPP…).
    public var isVPN: Bool
    /// NetworkManager's `yes` or `guess-yes`.
    public var isMetered: Bool
    /// NetworkManager's `yes` only: the connection's own setting, not a guess.
    public var isMeteredByUser: Bool
    public var connectivityIPv4: Connectivity
    public var connectivityIPv6: Connectivity
    /// The radio's signal, 0–100 %: a Wi-Fi device's active access point's strength,
    /// or a modem's recent signal quality (ModemManager); `nil` when none is known.
    public var signal: UInt8?
    /// A Wi-Fi device's active access point's SSID, as bytes; `nil` for other devices and
    /// while no access point is active (`NetworkIdentity`).
    public var ssid: [UInt8]?

    public init(
        interface: String, type: InterfaceType, activity: Activity, isVPN: Bool = false,
        isMetered: Bool = false, isMeteredByUser: Bool = false, connectivityIPv4: Connectivity = .unknown,
        connectivityIPv6: Connectivity = .unknown, signal: UInt8? = nil, ssid: [UInt8]? = nil
    ) {
        self.signal = signal
        self.ssid = ssid
        self.interface = interface
        self.type = type
        self.activity = activity
        self.isVPN = isVPN
        self.isMetered = isMetered || isMeteredByUser
        self.isMeteredByUser = isMeteredByUser
        self.connectivityIPv4 = connectivityIPv4
        self.connectivityIPv6 = connectivityIPv6
    }

    public func connectivity(_ family: AddressFamily) -> Connectivity {
        family == .ipv4 ? connectivityIPv4 : connectivityIPv6
    }
}

/// Whether NetworkManager's devices describe this network namespace's links. NetworkManager
/// lists every link of its own namespace (managed or not) and says nothing of which namespace
/// that is; a process in another one (a container given the host's bus socket, `ip netns exec`)
/// would otherwise take another network's connectivity and activations for its own. Foreign
/// only on evidence both ways: none of NetworkManager's devices but loopback is a link here,
/// and a link here (not loopback) is none of its devices. A device leaving or coming on one
/// side before the other has heard (the only NIC unplugged, a new one plugged in) is not
/// enough, so the verdict does not flap in NetworkManager's own namespace.
public enum NetworkManagerNamespace {
    public static func isForeign(deviceInterfaces: some Sequence<String>, linkNames: Set<String>) -> Bool {
        var devices = Set(deviceInterfaces)
        devices.remove("lo")
        let links = linkNames.subtracting(["lo"])
        return !devices.isEmpty && devices.isDisjoint(with: links) && !links.isSubset(of: devices)
    }
}

/// Everything one evaluation reads: an immutable snapshot.
public struct NetworkFacts: Sendable, Hashable {
    public var backend: BackendKind
    /// The global connectivity (NetworkManager's `Connectivity`).
    public var connectivity: Connectivity
    /// NetworkManager devices by IP interface name.
    public var devices: [String: DeviceFact]
    /// Kernel links by index.
    public var links: [Int32: LinkFact]
    /// The kernel's answers for the internet destinations of each family
    /// (`RTM_GETROUTE`, the route a packet to each would take), in the order
    /// they were asked; `nil` where the kernel has no route.
    public var internetRoutes: [AddressFamily: [RouteFact?]]
    /// While a VPN link can carry packets: the links with a route off the link
    /// (a unicast route through a gateway on it, in any table, or any unicast
    /// route through a point-to-point link), from the kernel's route tables. A
    /// tunnel needs one that is usable and not a VPN (`Engine.hasUnderlay`).
    /// `nil`: not asked, and no tunnel is judged by it.
    public var underlayLinks: Set<Int32>?
    /// NetworkManager's DNS configuration has a name server; `nil` when it was
    /// not read (no NetworkManager: the resolver's configuration file tells).
    public var dnsConfigured: Bool?
    /// Every address of every link (`RTM_GETADDR`), with its DAD state. `nil`: not
    /// read, and no answer's source is judged (`Engine.sourceCause`).
    public var addresses: [AddressFact]?

    public init(
        backend: BackendKind, connectivity: Connectivity = .unknown, devices: [String: DeviceFact] = [:],
        links: [Int32: LinkFact] = [:], internetRoutes: [AddressFamily: [RouteFact?]] = [:],
        underlayLinks: Set<Int32>? = nil, dnsConfigured: Bool? = nil, addresses: [AddressFact]? = nil
    ) {
        self.addresses = addresses
        self.backend = backend
        self.connectivity = connectivity
        self.devices = devices
        self.links = links
        self.internetRoutes = internetRoutes
        self.underlayLinks = underlayLinks
        self.dnsConfigured = dnsConfigured
    }

    /// Nothing is known yet: no backend.
    public static let unknown = NetworkFacts(backend: .none)
}

extension AddressFamily {
    /// "IPv4" or "IPv6", for sentences.
    public var name: String { self == .ipv4 ? "IPv4" : "IPv6" }
}

/// What the rules need to know of an address literal's text (canonical, as
/// `inet_ntop` writes it), without parsing it into bytes.
public enum AddressText {
    /// `169.254.0.0/16` or `fe80::/10` (a scope suffix `%eth0` allowed).
    public static func isLinkLocal(_ literal: String) -> Bool {
        if !literal.contains(":") { return literal.hasPrefix("169.254.") }
        guard let hextet = firstHextet(literal) else { return false }
        return hextet & 0xFFC0 == 0xFE80
    }

    /// An IPv6 link-local address (`fe80::/10`) without a scope (`%eth0`): no socket can reach
    /// it, as `connect` cannot tell on which link it is (`EINVAL`), whatever route the kernel
    /// would show for it.
    public static func isUnscopedIPv6LinkLocal(_ literal: String) -> Bool {
        literal.contains(":") && !literal.contains("%") && isLinkLocal(literal)
    }

    /// `127.0.0.0/8` or `::1`.
    public static func isLoopback(_ literal: String) -> Bool {
        literal.contains(":") ? literal == "::1" : literal.hasPrefix("127.")
    }

    /// `0.0.0.0` or `::`.
    public static func isUnspecified(_ literal: String) -> Bool {
        literal == "0.0.0.0" || literal == "::"
    }

    private static func firstHextet(_ literal: String) -> UInt16? {
        let head = literal.prefix { $0 != ":" }
        if head.isEmpty { return 0 }
        return UInt16(head, radix: 16)
    }
}
