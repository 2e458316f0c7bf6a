/// One interface table with its owner bound in, ready to export.
public struct BoundInterface {
    struct BoundMethod {
        let input: String
        let output: String
        let invoke: (MethodCall) throws(BusError) -> [DBusValue]?
    }
    struct BoundProperty {
        let signature: String
        let emits: EmitsChanged
        let get: () -> DBusValue
    }

    let name: String
    let methods: [String: BoundMethod]
    let properties: [(name: String, property: BoundProperty)]
    let signals: [String: Signal]
    let introspection: String

    init<Owner: AnyObject>(_ interface: Interface<Owner>, owner: Owner) {
        name = interface.name
        methods = Dictionary(uniqueKeysWithValues: interface.methods.map { m in
            (m.name, BoundMethod(input: m.input, output: m.output, invoke: { call throws(BusError) in
                try m.body(owner, call)
            }))
        })
        properties = interface.properties.map { p in
            (p.name, BoundProperty(signature: p.signature, emits: p.emits, get: { p.get(owner) }))
        }
        signals = Dictionary(uniqueKeysWithValues: interface.signals.map { ($0.name, $0) })
        introspection = interface.introspection
    }

    func property(_ name: String) -> BoundProperty? {
        properties.first { $0.name == name }?.property
    }

    /// All properties as `a{sv}`.
    func allProperties() -> DBusValue {
        .vardict(properties.map { ($0.name, $0.property.get()) })
    }
}

/// An object on the bus. Its owner calls `propertiesChanged()` after any state
/// change; this object works out which properties changed and announces only those.
public final class ExportedObject {
    public let path: ObjectPath
    let interfaces: [BoundInterface]
    private unowned let connection: BusConnection
    /// The values last announced (or first exported), per interface and property.
    private var announced: [String: [String: DBusValue]] = [:]

    init(path: ObjectPath, interfaces: [BoundInterface], connection: BusConnection) {
        self.path = path
        self.interfaces = interfaces
        self.connection = connection
        for interface in interfaces {
            var values: [String: DBusValue] = [:]
            for (name, property) in interface.properties where property.emits == .yes {
                values[name] = property.get()
            }
            announced[interface.name] = values
        }
    }

    func interface(_ name: String) -> BoundInterface? { interfaces.first { $0.name == name } }

    /// Emits `PropertiesChanged` for each interface whose announced properties
    /// changed since the last call, carrying only those properties.
    public func propertiesChanged() {
        for interface in interfaces {
            var changed: [(String, DBusValue)] = []
            var invalidated: [String] = []
            for (name, property) in interface.properties {
                switch property.emits {
                case .yes:
                    let value = property.get()
                    if announced[interface.name]?[name] != value {
                        announced[interface.name]?[name] = value
                        changed.append((name, value))
                    }
                case .invalidates:
                    invalidated.append(name)
                case .const, .no:
                    continue
                }
            }
            guard !changed.isEmpty else { continue }
            connection.emitSignal(path: path, interface: StandardInterfaces.properties, name: "PropertiesChanged",
                                  [.string(interface.name), .vardict(changed), .strings(invalidated)])
        }
    }

    /// Emits one of the object's declared signals. Arguments that do not match
    /// the declared signature are a programming error: logged, not sent.
    public func emit(_ signal: Signal, interface: String, _ values: [DBusValue]) {
        guard self.interface(interface)?.signals[signal.name] == signal else {
            Log.error("\(path) does not declare \(interface).\(signal.name)")
            return
        }
        guard values.signature == signal.signature else {
            Log.error("\(interface).\(signal.name) sent with '\(values.signature)', declared '\(signal.signature)'")
            return
        }
        connection.emitSignal(path: path, interface: interface, name: signal.name, values)
    }

    /// `a{sa{sv}}`: every interface with its properties (for ObjectManager).
    func interfacesAndProperties() -> DBusValue {
        .dictionary(keySignature: "s", valueSignature: "a{sv}",
                    interfaces.map { .init(.string($0.name), $0.allProperties()) })
    }
}

extension Interface {
    /// This table with `owner` bound in, for `BusConnection.export(at:interfaces:)`.
    public func bound(to owner: Owner) -> BoundInterface { BoundInterface(self, owner: owner) }
}

extension BusConnection {
    /// Exports `owner` at `path` with the given interface tables.
    @discardableResult
    public func export<Owner: AnyObject>(
        _ owner: Owner, at path: ObjectPath, interfaces: [Interface<Owner>]
    ) -> ExportedObject {
        export(at: path, interfaces: interfaces.map { $0.bound(to: owner) })
    }

    /// Exports interfaces (possibly of different owners) at `path`. An object below
    /// the ObjectManager path is announced with `InterfacesAdded`.
    @discardableResult
    public func export(at path: ObjectPath, interfaces: [BoundInterface]) -> ExportedObject {
        let object = ExportedObject(path: path, interfaces: interfaces, connection: self)
        objects[path] = object
        if let manager = managerAbove(path) {
            emitSignal(path: manager, interface: StandardInterfaces.objectManager, name: "InterfacesAdded",
                       [.objectPath(path), object.interfacesAndProperties()])
        }
        return object
    }

    /// Removes the object at `path`, announcing it with `InterfacesRemoved`.
    public func unexport(_ path: ObjectPath) {
        guard let object = objects.removeValue(forKey: path) else { return }
        if let manager = managerAbove(path) {
            emitSignal(path: manager, interface: StandardInterfaces.objectManager, name: "InterfacesRemoved",
                       [.objectPath(path), .strings(object.interfaces.map(\.name))])
        }
    }

    /// Serves `org.freedesktop.DBus.ObjectManager` at `path` for every object below it.
    public func addObjectManager(at path: ObjectPath) {
        objectManagerPath = path
    }

    /// The number of exported objects.
    public var exportedObjectCount: Int { objects.count }

    func managerAbove(_ path: ObjectPath) -> ObjectPath? {
        guard let manager = objectManagerPath, path != manager,
            path.rawValue.hasPrefix(manager.rawValue == "/" ? "/" : manager.rawValue + "/")
        else { return nil }
        return manager
    }

    /// The objects managed by `manager` as `a{oa{sa{sv}}}`.
    func managedObjects(_ manager: ObjectPath) -> DBusValue {
        let entries = objects.keys.sorted().compactMap { path -> DBusValue.DictionaryEntry? in
            guard managerAbove(path) == manager, let object = objects[path] else { return nil }
            return .init(.objectPath(path), object.interfacesAndProperties())
        }
        return .dictionary(keySignature: "o", valueSignature: "a{sa{sv}}", entries)
    }

    /// The names of the direct children of `path` among exported paths.
    func childNames(of path: ObjectPath) -> [String] {
        let prefix = path.rawValue == "/" ? "/" : path.rawValue + "/"
        var names = Set<String>()
        for p in objects.keys where p.rawValue.hasPrefix(prefix) && p != path {
            let rest = p.rawValue.dropFirst(prefix.count)
            names.insert(String(rest.prefix { $0 != "/" }))
        }
        return names.sorted()
    }

    /// Introspection data for `path`: its interfaces as the contract documents
    /// them, the standard interfaces, and its children.
    func introspect(_ path: ObjectPath) -> String {
        var xml = """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node>

            """
        if let object = objects[path] {
            for interface in object.interfaces {
                xml += interface.introspection + "\n"
            }
            xml += StandardInterfaces.xml
            if path == objectManagerPath { xml += StandardInterfaces.objectManagerXML }
        } else {
            xml += StandardInterfaces.navigationXML
        }
        for child in childNames(of: path) {
            xml += "  <node name=\"\(child)\"/>\n"
        }
        xml += "</node>\n"
        return xml
    }
}
