import ReachabilityBus
import ReachabilityCore
import ReachabilityPlatform

/// A watched target's identity on the bus: one normalised target, one object.
struct TargetKey: Hashable, Sendable {
    let kind: TargetKind
    let name: String

    /// The deterministic object path: `…/host/<escaped>`, `…/address/<escaped>` or `…/pair/<escaped>`.
    var path: ObjectPath {
        Names.rootPath.appending(kind.rawValue)!.appending(PathEscaping.escapeLabel(name))!
    }
}

extension TargetInput {
    var key: TargetKey { TargetKey(kind: kind, name: name) }

    /// `parseHost` for a method handler: bad input is `…Error.InvalidTarget`.
    static func validHost(_ text: String) throws(BusError) -> TargetInput {
        do { return try parseHost(text) } catch { throw ServiceError.invalidTarget(error.message) }
    }

    /// `parsePair` for a method handler: bad input is `…Error.InvalidTarget`.
    static func validPair(local: String, remote: String) throws(BusError) -> TargetInput {
        do { return try parsePair(local: local, remote: remote) } catch { throw ServiceError.invalidTarget(error.message) }
    }

    /// `parseAddress` for a method handler: bad input is `…Error.InvalidTarget`.
    static func validAddress(_ text: String) throws(BusError) -> TargetInput {
        do { return try parseAddress(text) } catch { throw ServiceError.invalidTarget(error.message) }
    }
}
