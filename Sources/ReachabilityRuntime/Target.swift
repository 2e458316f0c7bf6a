import Synchronization
import ReachabilityBus
import ReachabilityCore
import ReachabilityPlatform

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
    /// A local and a remote address literal of one family, either one empty (not both):
    /// the route packets from the local address to the remote one take, or, with only
    /// a local address, whether it is configured on a link that can carry packets
    /// (Apple's `SCNetworkReachabilityCreateWithAddressPair`).
    case addressPair(local: String, remote: String)

    /// `text` as a host name, or as an address when it is an address literal.
    public init(_ text: String) {
        self = (try? TargetInput.parseHost(text)).map { $0.isName ? .host(text) : .address(text) } ?? .host(text)
    }

    public var description: String {
        switch self {
        case .internet: "internet"
        case .host(let name): name
        case .address(let literal): literal
        case .addressPair(let local, let remote): "\(local.isEmpty ? "any" : local) -> \(remote.isEmpty ? "any" : remote)"
        }
    }

    /// Validates and normalises, exactly as the daemon does.
    package func key() throws(ReachabilityError) -> FeedKey {
        do {
            switch self {
            case .internet: return .internet
            case .host(let name): return .input(try TargetInput.parseHost(name))
            case .address(let literal): return .input(try TargetInput.parseAddress(literal))
            case .addressPair(let local, let remote): return .input(try TargetInput.parsePair(local: local, remote: remote))
            }
        } catch {
            throw .invalidTarget(error.message)
        }
    }

    /// `key()`, except that a name the daemon refuses is still a target, as Apple's
    /// `SCNetworkReachabilityCreateWithName` takes any name that is not empty: it is
    /// answered here as not reachable, its error saying why, and never sent to the
    /// daemon. `nil` only for an empty name.
    package func anyNameKey() -> FeedKey? {
        if case .host(let name) = self, name.isEmpty { return nil }
        do {
            return try key()
        } catch {
            return .unresolvable(name: description, reason: error.message)
        }
    }
}

/// What a watch is keyed by: a validated target (`TargetDescription`), or a name no lookup
/// can succeed for.
package enum FeedKey: Hashable, Sendable {
    case input(TargetInput)
    /// A name the daemon refuses (`InvalidTarget`), taken as Apple takes any name:
    /// answered here, without a backend, as not reachable with `reason` as its error.
    case unresolvable(name: String, reason: String)

    /// The root's internet.
    package static var internet: FeedKey { .input(.internet(nil)) }

    package var target: ReachabilityTarget {
        switch self {
        case .unresolvable(let name, _): .host(name)
        case .input(let input): ReachabilityTarget(input.map(\.description))
        }
    }
}

extension ReachabilityTarget {
    /// The target a description names (the internet asked as an address: that address).
    package init(_ description: TargetDescription<String>) {
        switch description {
        case .internet(let asked): self = asked.map { .address($0) } ?? .internet
        case .host(let name): self = .host(name)
        case .address(let literal): self = .address(literal)
        case .pair(let local, let remote): self = .addressPair(local: local ?? "", remote: remote ?? "")
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

    /// Why this process answers in-process although it did not ask to: no reachabilityd on
    /// the system bus, or one that answers for another network namespace than this
    /// process's (`Manager.NetworkNamespace`). `nil` while answers come from the daemon,
    /// before the choice, or when in-process was asked for.
    public static var inProcessReason: String? { reason.withLock { $0 } }

    private static let reason = Mutex<String?>(nil)

    static func noteInProcess(_ why: String) { reason.withLock { $0 = why } }
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
    package init(_ error: BusError) {
        switch error.name {
        case ServiceNames.Error.invalidTarget: self = .invalidTarget(error.message)
        case ServiceNames.Error.tooManyTargets: self = .tooManyTargets(error.message)
        case BusError.limitsExceeded("").name: self = .limitsExceeded(error.message)
        case BusError.serviceUnknown, BusError.nameHasNoOwner:
            self = .serviceUnavailable("\(ServiceNames.busName): \(error.message)")
        case BusError.noReply:
            // Running, but no answer in time (or it left before answering): not "not running".
            self = .serviceUnavailable("\(ServiceNames.busName) did not answer: \(error.message)")
        default: self = .failed(error.description)
        }
    }
}

/// A watched target and its state, as the daemon lists them.
public struct ReachabilitySnapshot: Sendable, Hashable {
    public let target: ReachabilityTarget
    public let state: ReachabilityState
}
