import ReachabilityCore
import ReachabilityRuntime

// The names this product's users see; the types live in the modules below it, so
// that the `NetworkPath` and `SystemConfiguration` products share them (a value of
// one is a value of the other) without importing this one.

/// `SCNetworkReachabilityFlags`, bit for bit as Apple defines them; its
/// `description` names the flags in words, as `scutil -r` does.
public typealias ReachabilityFlags = ReachabilityCore.ReachabilityFlags
/// Apple's name for the flags, so code written for SystemConfiguration (and
/// Alamofire's manager) compiles unchanged. The same type as the
/// `SystemConfiguration` product's.
public typealias SCNetworkReachabilityFlags = ReachabilityFlags
/// AFNetworking's `AFNetworkReachabilityStatus` (-1 unknown, 0, 1 WWAN, 2 Wi-Fi or Ethernet).
public typealias ReachabilityStatus = ReachabilityCore.ReachabilityStatus
/// The kind of the interface the traffic would leave through.
public typealias InterfaceType = ReachabilityCore.InterfaceType
/// NetworkManager's connectivity verdict (`unknown` without NetworkManager).
public typealias Connectivity = ReachabilityCore.Connectivity
/// Everything known about a target: flags, status, interface, type,
/// connectivity, metered, VPN, per-family reachability, addresses, error.
/// `flags` is `nil` while nothing is known yet.
public typealias ReachabilityState = ReachabilityCore.TargetState
/// Why a target is not reachable, in one stable word (`state.error` says it in words).
public typealias ReachabilityReason = ReachabilityCore.Reason
/// What to watch: the internet, a host name, an address literal or an address pair.
public typealias ReachabilityTarget = ReachabilityRuntime.ReachabilityTarget
/// Where answers come from: the daemon, or the same engine in-process.
public typealias ReachabilityMode = ReachabilityRuntime.ReachabilityMode
/// Why a target cannot be watched or queried.
public typealias ReachabilityError = ReachabilityRuntime.ReachabilityError
/// A watched target and its state, as the daemon lists them.
public typealias ReachabilitySnapshot = ReachabilityRuntime.ReachabilitySnapshot
/// A connection holding one of the daemon's targets (`daemonHolders()`).
public typealias ReachabilityHolder = ReachabilityRuntime.ReachabilityHolder
/// What the system bus says about an installed reachabilityd (`reachctl doctor`).
public typealias ReachabilityServiceCheck = ReachabilityRuntime.ReachabilityServiceCheck

extension ReachabilityState {
    /// Alamofire's status for this state.
    public var reachabilityStatus: NetworkReachabilityManager.NetworkReachabilityStatus {
        NetworkReachabilityManager.NetworkReachabilityStatus(status)
    }
}

extension NetworkReachabilityManager {
    /// The version of this library (and of the service it belongs to).
    public static let version = ServiceNames.version

    /// Checks the service on the system bus: asks the bus whether the name has
    /// an owner and can be activated, then calls the daemon (which starts it
    /// if it is activatable), and reads its version, backend and the internet
    /// target. Never evaluates in-process. Blocks the library's thread for the
    /// length of the calls (at most `timeoutMilliseconds` each): for tools.
    public static func checkService(timeoutMilliseconds: Int32 = 15_000) async -> ReachabilityServiceCheck {
        await ServiceCheck.run(timeoutMilliseconds: timeoutMilliseconds)
    }
}

/// Where the library's log goes: the application's swift-log (see `ReachabilityLogging.logger`).
public typealias ReachabilityLogging = ReachabilityRuntime.ReachabilityLogging
