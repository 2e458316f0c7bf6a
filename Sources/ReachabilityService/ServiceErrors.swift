import ReachabilityBus

/// The service's own D-Bus errors, each named once.
enum ServiceError {
    static let prefix = "io.github.reachabilityd.Reachability1.Error."

    /// The input is not a valid host name or address; the message says why.
    static func invalidTarget(_ message: String) -> BusError {
        BusError(name: prefix + "InvalidTarget", message: message)
    }

    /// A per-client or global limit on watched targets is reached.
    static func tooManyTargets(_ message: String) -> BusError {
        BusError(name: prefix + "TooManyTargets", message: message)
    }

    /// The caller does not hold that target.
    static func unknownTarget(_ message: String) -> BusError {
        BusError(name: prefix + "UnknownTarget", message: message)
    }
}
