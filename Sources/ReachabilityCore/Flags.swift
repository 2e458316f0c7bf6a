/// `SCNetworkReachabilityFlags`, bit for bit as Apple defines them.
public struct ReachabilityFlags: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    public static let transientConnection = ReachabilityFlags(rawValue: 1 << 0)
    public static let reachable = ReachabilityFlags(rawValue: 1 << 1)
    public static let connectionRequired = ReachabilityFlags(rawValue: 1 << 2)
    public static let connectionOnTraffic = ReachabilityFlags(rawValue: 1 << 3)
    public static let interventionRequired = ReachabilityFlags(rawValue: 1 << 4)
    public static let connectionOnDemand = ReachabilityFlags(rawValue: 1 << 5)
    public static let isLocalAddress = ReachabilityFlags(rawValue: 1 << 16)
    public static let isDirect = ReachabilityFlags(rawValue: 1 << 17)
    public static let isWWAN = ReachabilityFlags(rawValue: 1 << 18)

    /// Every flag with its name in words, in bit order (the names `scutil -r` uses).
    public static let named: [(flag: ReachabilityFlags, name: String)] = [
        (.transientConnection, "Transient Connection"),
        (.reachable, "Reachable"),
        (.connectionRequired, "Connection Required"),
        (.connectionOnTraffic, "Connection On Traffic"),
        (.interventionRequired, "Intervention Required"),
        (.connectionOnDemand, "Connection On Demand"),
        (.isLocalAddress, "Local Address"),
        (.isDirect, "Directly Reachable Address"),
        (.isWWAN, "WWAN"),
    ]

    /// The flags in words, comma-separated, or "Not Reachable" for none.
    public var description: String {
        let names = Self.named.filter { contains($0.flag) }.map(\.name)
        return names.isEmpty ? "Not Reachable" : names.joined(separator: ",")
    }
}

extension ReachabilityFlags {
    /// Apple's other name for `connectionOnTraffic` (the same bit).
    public static let connectionAutomatic = ReachabilityFlags.connectionOnTraffic
}

/// AFNetworking's `AFNetworkReachabilityStatus`.
public enum ReachabilityStatus: Int32, Sendable, Hashable {
    case unknown = -1
    case notReachable = 0
    case reachableViaWWAN = 1
    case reachableViaWiFi = 2

    /// `AFNetworkReachabilityStatusForFlags`, with `IsWWAN` honoured on every platform.
    public init(flags: ReachabilityFlags) {
        let reachable = flags.contains(.reachable)
        let needsConnection = flags.contains(.connectionRequired)
        let canConnectAutomatically =
            flags.contains(.connectionOnDemand) || flags.contains(.connectionOnTraffic)
        let canConnectWithoutUserInteraction =
            canConnectAutomatically && !flags.contains(.interventionRequired)
        let isNetworkReachable = reachable && (!needsConnection || canConnectWithoutUserInteraction)
        if !isNetworkReachable {
            self = .notReachable
        } else if flags.contains(.isWWAN) {
            self = .reachableViaWWAN
        } else {
            self = .reachableViaWiFi
        }
    }

    public var isReachable: Bool { self == .reachableViaWWAN || self == .reachableViaWiFi }
}
