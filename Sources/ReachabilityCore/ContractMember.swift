/// A method of the D-Bus contract: its name and its argument signatures (generated into `Contract`).
public struct ContractMethod: Sendable, Hashable {
    public let name: String
    public let input: String
    public let output: String
    public init(name: String, input: String, output: String) {
        self.name = name
        self.input = input
        self.output = output
    }
}

/// A property of the D-Bus contract: its name, type, and how changes are announced
/// (`org.freedesktop.DBus.Property.EmitsChangedSignal`: "true", "invalidates", "const", "false").
public struct ContractProperty: Sendable, Hashable {
    public let name: String
    public let type: String
    public let emitsChanged: String
    /// `read`, or `readwrite` for a property `Properties.Set` may change.
    public let access: String
    public init(name: String, type: String, emitsChanged: String = "true", access: String = "read") {
        self.name = name
        self.type = type
        self.emitsChanged = emitsChanged
        self.access = access
    }
}

/// A signal of the D-Bus contract: its name and signature.
public struct ContractSignal: Sendable, Hashable {
    public let name: String
    public let signature: String
    public init(name: String, signature: String) {
        self.name = name
        self.signature = signature
    }
}
