import ReachabilityBus
import ReachabilityCore
import ReachabilityPlatform

extension TargetDescription where Address == IPAddress {
    /// The deterministic object path (`pathLabels` below the root): `…/host/<escaped>`,
    /// `…/address/<escaped>` or `…/pair/<escaped>`; the root for the root's internet.
    var path: ObjectPath {
        pathLabels.reduce(Names.rootPath) { path, label in path.appending(label)! }
    }

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
