/// An interface table with its owner's type erased, built once per table and
/// shared by every object exported with it.
final class ErasedInterface: @unchecked Sendable {
    // Safety: immutable after init; its closures are @Sendable table entries.
    struct ErasedMethod {
        let input: String
        let output: String
        let invoke: @Sendable (AnyObject, MethodCall) throws(BusError) -> [DBusValue]?
    }
    struct ErasedProperty {
        let name: String
        let signature: String
        let emits: EmitsChanged
        let get: @Sendable (AnyObject) -> DBusValue
    }

    let name: String
    let methods: [String: ErasedMethod]
    let properties: [ErasedProperty]
    let propertyIndex: [String: Int]
    let signals: [String: Signal]
    let introspection: String
    /// Indices of the properties announced with their values.
    let announcedIndices: [Int]

    init<Owner: AnyObject>(
        name: String, methods: [Method<Owner>], properties: [Property<Owner>], signals: [Signal],
        introspection: String
    ) {
        self.name = name
        self.methods = Dictionary(uniqueKeysWithValues: methods.map { m in
            (m.name, ErasedMethod(input: m.input, output: m.output, invoke: { owner, call throws(BusError) in
                try m.body(unsafeDowncast(owner, to: Owner.self), call)
            }))
        })
        self.properties = properties.map { p in
            ErasedProperty(name: p.name, signature: p.signature, emits: p.emits,
                           get: { p.get(unsafeDowncast($0, to: Owner.self)) })
        }
        let erasedProperties = self.properties
        propertyIndex = Dictionary(uniqueKeysWithValues: erasedProperties.enumerated().map { ($1.name, $0) })
        self.signals = Dictionary(uniqueKeysWithValues: signals.map { ($0.name, $0) })
        self.introspection = introspection
        announcedIndices = erasedProperties.indices.filter { erasedProperties[$0].emits == .yes }
    }
}

/// One interface table with its owner bound in, ready to export.
public struct BoundInterface {
    let table: ErasedInterface
    let owner: AnyObject

    var name: String { table.name }

    func value(_ index: Int) -> DBusValue { table.properties[index].get(owner) }

    func property(_ name: String) -> Int? { table.propertyIndex[name] }

    /// All properties as `a{sv}`.
    func allProperties() -> DBusValue {
        .vardict(table.properties.indices.map { (table.properties[$0].name, value($0)) })
    }
}

/// An object on the bus. Its owner calls `propertiesChanged()` after any state
/// change; this object works out which properties changed and announces only those.
public final class ExportedObject {
    public let path: ObjectPath
    let interfaces: [BoundInterface]
    private unowned let connection: BusConnection
    /// The values last announced (or first exported): per interface, in the order
    /// of its table's `announcedIndices`.
    private var announced: [[DBusValue]]

    init(path: ObjectPath, interfaces: [BoundInterface], connection: BusConnection) {
        self.path = path
        self.interfaces = interfaces
        self.connection = connection
        announced = interfaces.map { i in i.table.announcedIndices.map { i.value($0) } }
    }

    func interface(_ name: String) -> BoundInterface? { interfaces.first { $0.name == name } }

    /// Emits `PropertiesChanged` for each interface whose announced properties
    /// changed since the last call, carrying only those properties.
    public func propertiesChanged() {
        for (i, interface) in interfaces.enumerated() {
            var changed: [(String, DBusValue)] = []
            for (slot, index) in interface.table.announcedIndices.enumerated() {
                let value = interface.value(index)
                if announced[i][slot] != value {
                    announced[i][slot] = value
                    changed.append((interface.table.properties[index].name, value))
                }
            }
            guard !changed.isEmpty else { continue }
            let invalidated = interface.table.properties.filter { $0.emits == .invalidates }.map(\.name)
            connection.emitSignal(path: path, interface: StandardInterfaces.properties, name: "PropertiesChanged",
                                  [.string(interface.name), .vardict(changed), .strings(invalidated)])
        }
    }

    /// Emits one of the object's declared signals. Arguments that do not match
    /// the declared signature are a programming error: logged, not sent.
    public func emit(_ signal: Signal, interface: String, _ values: [DBusValue]) {
        guard self.interface(interface)?.table.signals[signal.name] == signal else {
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
    public func bound(to owner: Owner) -> BoundInterface { BoundInterface(table: erased, owner: owner) }
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
                xml += interface.table.introspection + "\n"
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
