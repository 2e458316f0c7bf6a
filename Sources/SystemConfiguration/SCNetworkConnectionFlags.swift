// The flags' names from before `SCNetworkReachabilityFlags` (SCNetwork.h, deprecated
// by Apple but still declared), which code written for Apple still tests with:
// `flags.rawValue & UInt32(kSCNetworkFlagsReachable) != 0`. Apple's SDK imports them
// as `Int` constants. Each is the bit of the member of `SCNetworkReachabilityFlags`
// it was renamed to (Apple's values; a unit test checks them).

/// Apple's `SCNetworkConnectionFlags`: the flags as a plain word.
public typealias SCNetworkConnectionFlags = UInt32

/// `SCNetworkReachabilityFlags.transientConnection`.
public var kSCNetworkFlagsTransientConnection: Int { Int(SCNetworkReachabilityFlags.transientConnection.rawValue) }
/// `SCNetworkReachabilityFlags.reachable`.
public var kSCNetworkFlagsReachable: Int { Int(SCNetworkReachabilityFlags.reachable.rawValue) }
/// `SCNetworkReachabilityFlags.connectionRequired`.
public var kSCNetworkFlagsConnectionRequired: Int { Int(SCNetworkReachabilityFlags.connectionRequired.rawValue) }
/// `SCNetworkReachabilityFlags.connectionAutomatic` (`connectionOnTraffic`).
public var kSCNetworkFlagsConnectionAutomatic: Int { Int(SCNetworkReachabilityFlags.connectionAutomatic.rawValue) }
/// `SCNetworkReachabilityFlags.interventionRequired`.
public var kSCNetworkFlagsInterventionRequired: Int { Int(SCNetworkReachabilityFlags.interventionRequired.rawValue) }
/// `SCNetworkReachabilityFlags.isLocalAddress`.
public var kSCNetworkFlagsIsLocalAddress: Int { Int(SCNetworkReachabilityFlags.isLocalAddress.rawValue) }
/// `SCNetworkReachabilityFlags.isDirect`.
public var kSCNetworkFlagsIsDirect: Int { Int(SCNetworkReachabilityFlags.isDirect.rawValue) }
