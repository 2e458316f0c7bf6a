import ReachabilityBus
import ReachabilityCore
import ReachabilityPlatform

/// `SCNetworkReachabilityFlags`, bit for bit as Apple defines them; its
/// `description` names the flags in words, as `scutil -r` does.
public typealias ReachabilityFlags = ReachabilityCore.ReachabilityFlags
/// Apple's name for the flags, so code written for SystemConfiguration (and
/// Alamofire's manager) compiles unchanged.
public typealias SCNetworkReachabilityFlags = ReachabilityFlags

extension ReachabilityFlags {
    /// Apple's other name for `connectionOnTraffic` (the same bit).
    public static let connectionAutomatic = ReachabilityFlags.connectionOnTraffic
}

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

/// What to watch.
public enum ReachabilityTarget: Sendable, Hashable, CustomStringConvertible {
    /// The internet: reachability of a default route (Apple's zero address).
    case internet
    /// A host name (IDN allowed); an address literal given here is watched as that address.
    case host(String)
    /// An IPv4 or IPv6 address literal, IPv6 with an optional `%scope`.
    case address(String)

    /// `text` as a host name, or as an address when it is an address literal.
    public init(_ text: String) {
        self = (try? TargetInput.parseHost(text)).map { if case .address = $0 { .address(text) } else { .host(text) } }
            ?? .host(text)
    }

    public var description: String {
        switch self {
        case .internet: "internet"
        case .host(let name): name
        case .address(let literal): literal
        }
    }

    /// Validates and normalises, exactly as the daemon does.
    func key() throws(ReachabilityError) -> FeedKey {
        do {
            switch self {
            case .internet: return .internet
            case .host(let name): return .input(try TargetInput.parseHost(name))
            case .address(let literal): return .input(try TargetInput.parseAddress(literal))
            }
        } catch {
            throw .invalidTarget(error.message)
        }
    }
}

/// What a watch is keyed by: the internet or a normalised host or address.
enum FeedKey: Hashable, Sendable {
    case internet
    case input(TargetInput)

    var target: ReachabilityTarget {
        switch self {
        case .internet: .internet
        case .input(.host(let name)): .host(name)
        case .input(.address(let address)): .address(address.description)
        }
    }
}

/// Where answers come from.
public enum ReachabilityMode: String, Sendable, Hashable, CustomStringConvertible {
    /// From `reachabilityd` on the system bus, shared with every other client.
    case daemon
    /// From the same engine running inside this process (no daemon on the bus):
    /// NetworkManager through libnm when it runs, else the kernel alone.
    case inProcess = "in-process"

    public var description: String { rawValue }
}

/// Why a target cannot be watched or queried.
public enum ReachabilityError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Not a valid host name or address literal; the message says why.
    case invalidTarget(String)
    /// The daemon's limit on watched targets (per client or in all) is reached.
    case tooManyTargets(String)
    /// The daemon's limit on queries in flight is reached.
    case limitsExceeded(String)
    /// No daemon to talk to (with `.daemon` requested), or no way to watch the network.
    case serviceUnavailable(String)
    /// Any other failure, with the D-Bus error name when there is one.
    case failed(String)

    public var message: String {
        switch self {
        case .invalidTarget(let m), .tooManyTargets(let m), .limitsExceeded(let m), .serviceUnavailable(let m),
            .failed(let m):
            m
        }
    }

    public var description: String { message }

    /// A daemon's D-Bus error as a typed error.
    init(_ error: BusError) {
        switch error.name {
        case ServiceNames.Error.invalidTarget: self = .invalidTarget(error.message)
        case ServiceNames.Error.tooManyTargets: self = .tooManyTargets(error.message)
        case BusError.limitsExceeded("").name: self = .limitsExceeded(error.message)
        case BusError.serviceUnknown, BusError.nameHasNoOwner, BusError.noReply:
            self = .serviceUnavailable("\(ServiceNames.busName): \(error.message)")
        default: self = .failed(error.description)
        }
    }
}

extension ReachabilityState {
    /// Alamofire's status for this state.
    public var reachabilityStatus: NetworkReachabilityManager.NetworkReachabilityStatus {
        NetworkReachabilityManager.NetworkReachabilityStatus(status)
    }
}

extension NetworkReachabilityManager {
    /// The version of this library (and of the service it belongs to).
    public static let version = ServiceNames.version
}
