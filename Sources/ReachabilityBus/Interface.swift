/// Declarative tables: each exported D-Bus interface is one `Interface` value
/// listing its methods, properties and signals, with the prose XML of the
/// contract that introspection serves.

/// `org.freedesktop.DBus.Property.EmitsChangedSignal`.
public enum EmitsChanged: String, Sendable {
    case yes = "true"
    case invalidates
    case const
    case no = "false"
}

public struct Method<Owner: AnyObject>: Sendable {
    public let name: String
    /// The signature of the arguments; a call with any other is refused with `InvalidArgs`.
    public let input: String
    /// The signature of the reply; checked before it is sent.
    public let output: String
    /// Returns the reply's values, or `nil` when it will answer later through `call.reply`.
    public let body: @Sendable (Owner, MethodCall) throws(BusError) -> [DBusValue]?

    public init(
        _ name: String, input: String = "", output: String = "",
        _ body: @escaping @Sendable (Owner, MethodCall) throws(BusError) -> [DBusValue]?
    ) {
        self.name = name
        self.input = input
        self.output = output
        self.body = body
    }
}

public struct Property<Owner: AnyObject>: Sendable {
    public let name: String
    public let signature: String
    public let emits: EmitsChanged
    public let get: @Sendable (Owner) -> DBusValue

    public init(
        _ name: String, _ signature: String, emits: EmitsChanged = .yes,
        _ get: @escaping @Sendable (Owner) -> DBusValue
    ) {
        self.name = name
        self.signature = signature
        self.emits = emits
        self.get = get
    }
}

public struct Signal: Sendable, Hashable {
    public let name: String
    public let signature: String
    public init(_ name: String, signature: String) {
        self.name = name
        self.signature = signature
    }
}

public struct Interface<Owner: AnyObject>: Sendable {
    public let name: String
    public let methods: [Method<Owner>]
    public let properties: [Property<Owner>]
    public let signals: [Signal]
    /// The `<interface>` element served by `Introspect`.
    public let introspection: String
    /// The same table, type-erased once for every object that exports it.
    let erased: ErasedInterface

    public init(
        _ name: String, methods: [Method<Owner>] = [], properties: [Property<Owner>] = [],
        signals: [Signal] = [], introspection: String
    ) {
        self.name = name
        self.methods = methods
        self.properties = properties
        self.signals = signals
        self.introspection = introspection
        self.erased = ErasedInterface(name: name, methods: methods, properties: properties, signals: signals,
                                      introspection: introspection)
    }
}

/// The interface definitions of an introspection XML document, by name.
public struct InterfaceContract: Sendable {
    /// Each `<interface>` element, as written (comments inside it included).
    public let elements: [String: String]

    public init(xml: String) {
        var elements: [String: String] = [:]
        var rest = Substring(xml)
        while let start = rest.firstRange(of: "<interface name=\""),
            let end = rest[start.upperBound...].firstRange(of: "</interface>")
        {
            let nameEnd = rest[start.upperBound...].firstIndex(of: "\"")!
            let name = String(rest[start.upperBound..<nameEnd])
            elements[name] = "  " + String(rest[start.lowerBound..<end.upperBound])
            rest = rest[end.upperBound...]
        }
        self.elements = elements
    }

    /// The element for `name`; a missing one is a programming error caught by the tests.
    public subscript(name: String) -> String {
        guard let element = elements[name] else {
            preconditionFailure("interface \(name) is not in the contract")
        }
        return element
    }
}
