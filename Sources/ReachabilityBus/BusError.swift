/// A named D-Bus error with a message a person can act on.
public struct BusError: Error, Hashable, Sendable, CustomStringConvertible {
    public var name: String
    public var message: String

    public init(name: String, message: String) {
        self.name = name
        self.message = message
    }

    public var description: String { "\(name): \(message)" }

    static let prefix = "org.freedesktop.DBus.Error."

    public static func failed(_ m: String) -> BusError { .init(name: prefix + "Failed", message: m) }
    public static func invalidArgs(_ m: String) -> BusError { .init(name: prefix + "InvalidArgs", message: m) }
    public static func unknownMethod(_ m: String) -> BusError { .init(name: prefix + "UnknownMethod", message: m) }
    public static func unknownObject(_ m: String) -> BusError { .init(name: prefix + "UnknownObject", message: m) }
    public static func unknownInterface(_ m: String) -> BusError {
        .init(name: prefix + "UnknownInterface", message: m)
    }
    public static func unknownProperty(_ m: String) -> BusError { .init(name: prefix + "UnknownProperty", message: m) }
    public static func propertyReadOnly(_ m: String) -> BusError {
        .init(name: prefix + "PropertyReadOnly", message: m)
    }
    public static func accessDenied(_ m: String) -> BusError { .init(name: prefix + "AccessDenied", message: m) }
    /// Error names the bus itself answers with when a service is missing or silent.
    public static let serviceUnknown = prefix + "ServiceUnknown"
    public static let nameHasNoOwner = prefix + "NameHasNoOwner"
    public static let noReply = prefix + "NoReply"

    public static func limitsExceeded(_ m: String) -> BusError { .init(name: prefix + "LimitsExceeded", message: m) }
}
