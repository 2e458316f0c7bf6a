/// What a target is.
public enum TargetKind: String, Sendable, Hashable, CaseIterable {
    /// `pair`: a local and/or a remote address (Apple's `…CreateWithAddressPair`).
    case internet, host, address, pair
}

/// The evaluated state of one target: the values its `Target` properties show.
public struct TargetState: Sendable, Hashable {
    /// `nil` while the facts are not known yet (Status -1).
    public var flags: ReachabilityFlags?
    public var interface: String
    public var interfaceType: InterfaceType
    public var addresses: [String]
    public var connectivity: Connectivity
    public var isMetered: Bool
    public var isVPN: Bool
    public var reachableIPv4: Bool
    public var reachableIPv6: Bool
    /// Why the target is not reachable, in one stable word (`nil` when it is, or
    /// while unknown); `error` says it in words.
    public var reason: Reason?
    /// The cause in words: which route, link or address ("no carrier on wlan0"),
    /// or the resolver's message; "" when reachable.
    public var error: String

    public init(
        flags: ReachabilityFlags?, interface: String = "", interfaceType: InterfaceType = .none,
        addresses: [String] = [], connectivity: Connectivity = .unknown, isMetered: Bool = false,
        isVPN: Bool = false, reachableIPv4: Bool = false, reachableIPv6: Bool = false,
        reason: Reason? = nil, error: String = ""
    ) {
        self.reason = reason
        self.flags = flags
        self.interface = interface
        self.interfaceType = interfaceType
        self.addresses = addresses
        self.connectivity = connectivity
        self.isMetered = isMetered
        self.isVPN = isVPN
        self.reachableIPv4 = reachableIPv4
        self.reachableIPv6 = reachableIPv6
        self.error = error
    }

    /// The state before anything is known.
    public static let unknown = TargetState(flags: nil)

    /// The exported `Flags`: 0 while unknown.
    public var exportedFlags: ReachabilityFlags { flags ?? [] }

    public var status: ReachabilityStatus {
        guard let flags else { return .unknown }
        return ReachabilityStatus(flags: flags)
    }

    public var isReachable: Bool { status.isReachable }
    public var isReachableViaWiFi: Bool { isReachable && interfaceType == .wifi }
    public var isReachableViaWWAN: Bool { isReachable && interfaceType == .wwan }
    public var isReachableViaEthernet: Bool { isReachable && interfaceType == .ethernet }
    public var isConnectionRequired: Bool { exportedFlags.contains(.connectionRequired) }

    /// The answer in a few words, for the log: "reachable via eth0", "not reachable
    /// (no carrier on wlan0)", "unknown".
    public var summary: String {
        guard flags != nil else { return "unknown" }
        if isReachable { return interface.isEmpty ? "reachable" : "reachable via \(interface)" }
        let why = error.isEmpty ? reason?.rawValue ?? "" : error
        return why.isEmpty ? "not reachable" : "not reachable (\(why))"
    }
}
