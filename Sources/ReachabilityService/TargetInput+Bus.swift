import ReachabilityBus
import ReachabilityCore
import ReachabilityPlatform

/// A watched target's identity on the bus, as the registry keys its objects: the description
/// with each address as its canonical literal. One normalised target, one object; and compact
/// (a literal is 16 bytes where a parsed address is 40 and an array), since a key is held in
/// five tables per target and hashed at every call that names one.
typealias TargetKey = TargetDescription<String>

extension TargetDescription {
    /// The deterministic object path (`pathLabels` below the root): `…/host/<escaped>`,
    /// `…/address/<escaped>` or `…/pair/<escaped>`; the root for the root's internet.
    var path: ObjectPath {
        pathLabels.reduce(Names.rootPath) { path, label in path.appending(label)! }
    }
}

extension TargetDescription where Address == IPAddress {
    var key: TargetKey { map(\.description) }

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
