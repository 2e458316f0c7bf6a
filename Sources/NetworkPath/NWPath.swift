import ReachabilityCore

/// The state of the network as one monitor sees it, with the Network
/// framework's names: whether a path to the internet exists over the
/// interfaces the monitor allows, which interfaces it can use, and what they
/// offer. Paths are compared by every fact, so a monitor reports a new one
/// only when something a program can observe changed.
public struct NWPath: Equatable, Sendable, CustomDebugStringConvertible {
    /// Whether the path can carry traffic.
    public enum Status: Equatable, Sendable {
        /// Traffic can leave over one of `availableInterfaces`.
        case satisfied
        /// No allowed interface has a route to the internet (or the connection is held
        /// back: a captive portal, NetworkManager's connectivity check said none).
        case unsatisfied
        /// Not usable now, but a connection can come up on its own when traffic asks for
        /// it (a dial-on-demand or VPN-on-demand connection).
        case requiresConnection
    }

    /// Why a path is unsatisfied, in Apple's cases where one fits. Linux has no
    /// per-app policy that denies local-network access and no VPN that must be
    /// active; a monitor's own `prohibitedInterfaceTypes` (or required type) that
    /// leaves out the only usable cellular or Wi-Fi interfaces is the nearest thing
    /// to "denied" and is told as such. Every other cause is `notAvailable`, with
    /// the service's word in `reason`.
    public enum UnsatisfiedReason: Equatable, Sendable {
        /// No reason in Apple's terms (see `reason` for the Linux one).
        case notAvailable
        /// Only cellular (modem) interfaces could carry traffic, and the monitor prohibits them.
        case cellularDenied
        /// Only Wi-Fi interfaces could carry traffic, and the monitor prohibits them.
        case wifiDenied
        /// The user has disabled local network access for this app (never on Linux).
        case localNetworkDenied
        /// A required VPN is not active (never on Linux).
        case vpnInactive
    }

    /// How well the link layer of the path's interface can carry traffic: a hint to
    /// tune the starting values of algorithms that scale with the network (a first
    /// bit rate, a buffer size), never a reason to refuse or delay a connection, nor
    /// to override what a connection measures. Apple's cases and meaning; on Linux it
    /// comes from the Wi-Fi access point's signal strength or the modem's signal
    /// quality (0–30 % minimal, 31–55 % moderate, 56–100 % good), wired Ethernet
    /// with carrier is good, and anything else unknown (see the catalog's
    /// "Link quality").
    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    public enum LinkQuality: Hashable, Sendable {
        /// No measurement is available: no interface, a tunnel, Bluetooth, or a radio
        /// whose signal is not known (no NetworkManager, no ModemManager).
        case unknown
        /// A weak signal: at most one of four bars.
        case minimal
        /// A fair signal: two bars.
        case moderate
        /// A strong signal (three or four bars), or a wire with carrier.
        case good
    }

    public let status: Status
    public let unsatisfiedReason: UnsatisfiedReason
    /// Why the path is unsatisfied, in the service's stable words ("no-carrier",
    /// "no-source-address", "portal", "interface-prohibited"…: the contract's
    /// `Reason`); "" when satisfied.
    public let reason: String
    /// Apple's ultra-constrained paths (satellite links with very little capacity):
    /// always false, Linux has no such signal.
    public var isUltraConstrained: Bool { false }
    /// The interfaces the path can use, in the kernel's order of preference: the
    /// one traffic leaves through first. Those the monitor prohibits, or that do not
    /// have the required type, are left out, and so are interfaces with no route to
    /// the internet (down, no carrier, no address, no default route).
    public let availableInterfaces: [NWInterface]
    /// The path uses a metered connection (NetworkManager's "yes" or "guess-yes")
    /// or a mobile broadband modem.
    public let isExpensive: Bool
    /// The user asked for the connection to be used sparingly: its NetworkManager
    /// connection is metered "yes" by the user's own setting (the nearest Linux
    /// has to Low Data Mode).
    public let isConstrained: Bool
    /// An available interface has a route to the internet for IPv4.
    public let supportsIPv4: Bool
    /// An available interface has a route to the internet for IPv6.
    public let supportsIPv6: Bool
    /// A name server is configured and the path has an interface to reach it.
    public let supportsDNS: Bool
    /// The next hops of the available interfaces' routes to the internet (port 0).
    public let gateways: [NWEndpoint]
    /// The interface types traffic on this path goes through: the first available
    /// interface's, and for a tunnel, also that of the interface under it.
    let usedTypes: Set<NWInterface.InterfaceType>
    /// `linkQuality`, stored as the facts say it: a stored property cannot carry Apple's
    /// availability.
    let quality: ReachabilityCore.LinkQuality

    /// The link quality of the path's first available interface when it is the system's
    /// preferred one (the only interface whose quality the facts carry); `.unknown` for
    /// a path through another interface, or none.
    @available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *)
    public var linkQuality: LinkQuality {
        switch quality {
        case .unknown: .unknown
        case .minimal: .minimal
        case .moderate: .moderate
        case .good: .good
        }
    }

    /// How many times the network changed before this path (another network behind the same
    /// addressing, another router or Wi-Fi SSID: `PathState.invalidations`): after one, the
    /// path is a new path even when nothing else differs, as Apple's monitor delivers a new
    /// path on a gateway change.
    var generation: UInt64 = 0

    /// This path, as the one after `invalidations` network changes.
    func after(_ invalidations: UInt64) -> NWPath {
        var path = self
        path.generation = invalidations
        return path
    }

    init(status: Status, availableInterfaces: [NWInterface] = [], usedTypes: Set<NWInterface.InterfaceType> = [],
         isExpensive: Bool = false, isConstrained: Bool = false, supportsIPv4: Bool = false,
         supportsIPv6: Bool = false, supportsDNS: Bool = false, gateways: [NWEndpoint] = [],
         linkQuality: ReachabilityCore.LinkQuality = .unknown, unsatisfiedReason: UnsatisfiedReason = .notAvailable,
         reason: String = "") {
        quality = linkQuality
        self.status = status
        self.unsatisfiedReason = unsatisfiedReason
        self.reason = status == .satisfied ? "" : reason
        self.availableInterfaces = availableInterfaces
        self.usedTypes = usedTypes
        self.isExpensive = isExpensive
        self.isConstrained = isConstrained
        self.supportsIPv4 = supportsIPv4
        self.supportsIPv6 = supportsIPv6
        self.supportsDNS = supportsDNS
        self.gateways = gateways
    }

    /// The local endpoint of a connection's path. A monitor's path belongs to no
    /// connection, so it is always `nil` here, as Apple's is for a monitor.
    public var localEndpoint: NWEndpoint? { nil }

    /// The remote endpoint of a connection's path; `nil` for a monitor's path (always, here).
    public var remoteEndpoint: NWEndpoint? { nil }

    /// What a monitor reports before it has an answer: unsatisfied, no interface.
    static let unsatisfied = NWPath(status: .unsatisfied)

    /// Whether traffic on the path leaves through an interface of `type`: the
    /// first available interface's type, and when that is a VPN or tunnel, also
    /// the type of the interface its own packets leave through (a VPN over Wi-Fi
    /// uses `.other` and `.wifi`). Never true for a path that is not satisfied.
    public func usesInterfaceType(_ type: NWInterface.InterfaceType) -> Bool {
        usedTypes.contains(type)
    }

    /// One line: status, interfaces, families, DNS and cost, like Apple's.
    public var debugDescription: String {
        var parts = ["\(status)"]
        if !availableInterfaces.isEmpty {
            parts.append("interface: " + availableInterfaces.map(\.name).joined(separator: ","))
        }
        if supportsIPv4 { parts.append("ipv4") }
        if supportsIPv6 { parts.append("ipv6") }
        if supportsDNS { parts.append("dns") }
        if isExpensive { parts.append("expensive") }
        if isConstrained { parts.append("constrained") }
        return parts.joined(separator: ", ")
    }
}
