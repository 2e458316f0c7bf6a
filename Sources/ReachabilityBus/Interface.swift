import ReachabilityLoop

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
    public let body: @LoopActor @Sendable (Owner, MethodCall) throws(BusError) -> [DBusValue]?

    public init(
        _ name: String, input: String = "", output: String = "",
        _ body: @escaping @LoopActor @Sendable (Owner, MethodCall) throws(BusError) -> [DBusValue]?
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
    public let get: @LoopActor @Sendable (Owner) -> DBusValue
    /// Takes a value of `signature` from `Properties.Set` (the caller is the call's);
    /// `nil`: the property is read-only.
    public let set: (@LoopActor @Sendable (Owner, DBusValue, MethodCall) throws(BusError) -> Void)?

    public init(
        _ name: String, _ signature: String, emits: EmitsChanged = .yes,
        _ get: @escaping @LoopActor @Sendable (Owner) -> DBusValue,
        set: (@LoopActor @Sendable (Owner, DBusValue, MethodCall) throws(BusError) -> Void)? = nil
    ) {
        self.name = name
        self.signature = signature
        self.emits = emits
        self.get = get
        self.set = set
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

/// A signal that follows `PropertiesChanged` whenever one of the properties that make up
/// its arguments changed, carrying their current values: `StatusChanged(Status, Flags)`.
/// So it is sent exactly once per change to a peer that reads, and once for all the changes
/// a peer that fell behind missed, when its properties differ from what it was last told.
public struct FollowUp: Sendable {
    public let signal: Signal
    /// The properties (of the same interface) whose values are the signal's arguments.
    public let arguments: [String]

    public init(_ signal: Signal, arguments: [String]) {
        self.signal = signal
        self.arguments = arguments
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
        signals: [Signal] = [], followUp: FollowUp? = nil, introspection: String
    ) {
        self.name = name
        self.methods = methods
        self.properties = properties
        self.signals = signals
        self.introspection = introspection
        self.erased = ErasedInterface(name: name, methods: methods, properties: properties, signals: signals,
                                      followUp: followUp, introspection: introspection)
    }
}

/// The interface definitions of an introspection XML document, by name, with
/// their comments: what introspection serves is the file as written.
public struct InterfaceContract: Sendable {
    /// Each `<interface>` element, as written (comments inside it included),
    /// preceded by the comment written just before it (the interface's own
    /// documentation: what it is for, and the errors its methods return).
    public let elements: [String: String]
    /// The comments before `<node>`: the document's own documentation (the
    /// bus name, the root object), served with the first interface of the file.
    public let header: String
    /// The name of the first `<interface>` of the file.
    public let firstInterface: String?

    public init(xml: String) {
        var elements: [String: String] = [:]
        var first: String?
        var rest = Substring(xml)
        let node = rest.firstRange(of: "<node")
        header = Self.comments(in: node.map { rest[..<$0.lowerBound] } ?? "")
        if let node { rest = rest[node.upperBound...] }
        while let start = rest.firstRange(of: "<interface name=\""),
            let end = rest[start.upperBound...].firstRange(of: "</interface>")
        {
            let nameEnd = rest[start.upperBound...].firstIndex(of: "\"")!
            let name = String(rest[start.upperBound..<nameEnd])
            let comment = Self.comments(in: rest[..<start.lowerBound])
            elements[name] = comment + "  " + String(rest[start.lowerBound..<end.upperBound])
            first = first ?? name
            rest = rest[end.upperBound...]
        }
        self.elements = elements
        firstInterface = first
    }

    /// The comments in `text` (which holds nothing else but white space and
    /// markup declarations), each on its own lines, indented as in the file.
    static func comments(in text: Substring) -> String {
        var result = ""
        var rest = text
        while let open = rest.firstRange(of: "<!--"), let close = rest[open.upperBound...].firstRange(of: "-->") {
            let lineStart = rest[..<open.lowerBound].lastIndex(of: "\n").map { rest.index(after: $0) }
                ?? rest.startIndex
            let indent = rest[lineStart..<open.lowerBound].allSatisfy { $0 == " " }
                ? String(rest[lineStart..<open.lowerBound]) : ""
            result += indent + String(rest[open.lowerBound..<close.upperBound]) + "\n"
            rest = rest[close.upperBound...]
        }
        return result
    }

    /// The element for `name`, with the document's header comment when it is
    /// the file's first interface; a missing one is a programming error caught
    /// by the tests.
    public subscript(name: String) -> String {
        guard let element = elements[name] else {
            preconditionFailure("interface \(name) is not in the contract")
        }
        return name == firstInterface ? header + element : element
    }
}
