/// What `reachctl wait` waits for in each target's state, and what the units that follow
/// the network (`reachability-online.target`, `reachability-unmetered.target`) stand for:
/// written once, here, for the command, its unit and the units helper alike.
public struct WaitCondition: Sendable, Hashable {
    /// The address families that must be reachable: `-4` IPv4, `-6` IPv6, both: both.
    public var ipv4 = false
    public var ipv6 = false
    /// `--unmetered`: the path must not be metered.
    public var unmetered = false
    /// `--full`: NetworkManager's connectivity check must say `full` (not only a route).
    public var fullConnectivity = false

    public init(ipv4: Bool = false, ipv6: Bool = false, unmetered: Bool = false, fullConnectivity: Bool = false) {
        self.ipv4 = ipv4
        self.ipv6 = ipv6
        self.unmetered = unmetered
        self.fullConnectivity = fullConnectivity
    }

    /// Why `state` does not meet the condition, the first cause found; `nil` when it does.
    public func unmet(by state: TargetState) -> Unmet? {
        guard state.flags != nil else { return .unknown }
        guard state.isReachable else { return .notReachable(state.reason, state.error) }
        if ipv4 && !state.reachableIPv4 { return .family("IPv4") }
        if ipv6 && !state.reachableIPv6 { return .family("IPv6") }
        if unmetered && state.isMetered { return .metered }
        if fullConnectivity && state.connectivity != .full { return .connectivity(state.connectivity) }
        return nil
    }

    /// Whether `state` meets the condition.
    public func isMet(by state: TargetState) -> Bool { unmet(by: state) == nil }

    /// Whether waiting for `states` is over: every one meets the condition, or (with `any`)
    /// one of them does. An empty list is never met.
    public func isMet(by states: [TargetState?], any: Bool) -> Bool {
        guard !states.isEmpty else { return false }
        let met = states.map { $0.map(isMet) ?? false }
        return any ? met.contains(true) : !met.contains(false)
    }

    /// Why a target is not (yet) what is waited for: a stable word first (the target's
    /// `Reason` when it is not reachable), then the detail in words where there is one.
    public enum Unmet: Sendable, Hashable, CustomStringConvertible {
        /// No answer yet (Status -1: the backend starting, a host's first lookup in flight).
        case unknown
        case notReachable(Reason?, String)
        /// Reachable, but not over this family.
        case family(String)
        case metered
        /// Reachable, but the connectivity check says otherwise.
        case connectivity(Connectivity)

        public var description: String {
            switch self {
            case .unknown: "unknown (no answer yet)"
            case .notReachable(let reason, let detail):
                (reason?.rawValue ?? "not-reachable") + (detail.isEmpty ? "" : " (\(detail))")
            case .family(let family): "no-\(family.lowercased()) (reachable, but not over \(family))"
            case .metered: "metered (reachable, but the connection is metered)"
            case .connectivity(let connectivity):
                "connectivity-\(connectivity.rawValue) (reachable, but the connectivity check says "
                    + "\(connectivity.rawValue), not full)"
            }
        }
    }

    /// `reachability-online.target`'s condition: the internet reachable.
    public static let online = WaitCondition()
    /// `reachability-unmetered.target`'s: the internet reachable, not metered.
    public static let onlineUnmetered = WaitCondition(unmetered: true)
}

/// Debounce of a unit that follows a condition (`reachctl follow-units`): started as soon as
/// the condition holds, stopped only once it has failed for `stopDelay` without a break, so
/// that a carrier that blinks does not stop a backup bound to the unit. Pure: the caller
/// gives the time (monotonic µs) and arms a timer for `deadline`.
public struct UnitDebounce: Sendable, Hashable {
    /// How long the condition must fail before the unit is stopped (µs).
    public let stopDelay: Int64
    /// Whether the unit is (asked to be) running.
    public private(set) var isActive = false
    /// When the condition began to fail while the unit runs (monotonic µs); `nil` otherwise.
    public private(set) var failingSince: Int64?

    public init(stopDelay: Int64) { self.stopDelay = stopDelay }

    /// What to do now.
    public enum Action: Sendable, Hashable {
        case start, stop, none
    }

    /// The condition is `met` (or not) at `now`: whether to start or stop the unit.
    public mutating func update(met: Bool, now: Int64) -> Action {
        if met {
            failingSince = nil
            guard !isActive else { return .none }
            isActive = true
            return .start
        }
        guard isActive else { return .none }
        let since = failingSince ?? now
        failingSince = since
        guard now - since >= stopDelay else { return .none }
        isActive = false
        failingSince = nil
        return .stop
    }

    /// When `update` must be called again, though nothing changes (a stop waiting its delay).
    public var deadline: Int64? { failingSince.map { $0 + stopDelay } }
}
