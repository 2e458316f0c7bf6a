import ReachabilityBus
import ReachabilityCore

/// The service's own D-Bus errors (named in `ServiceNames.Error`).
enum ServiceError {
    /// The input is not a valid host name or address; the message says why.
    static func invalidTarget(_ message: String) -> BusError {
        BusError(name: ServiceNames.Error.invalidTarget, message: message)
    }

    /// A per-client or global limit on watched targets is reached.
    static func tooManyTargets(_ message: String) -> BusError {
        BusError(name: ServiceNames.Error.tooManyTargets, message: message)
    }

    /// The caller does not hold that target.
    static func unknownTarget(_ message: String) -> BusError {
        BusError(name: ServiceNames.Error.unknownTarget, message: message)
    }
}
