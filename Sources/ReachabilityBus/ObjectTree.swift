import ReachabilityLoop

/// The objects a connection exports, by path, and what the standard interfaces
/// say about them (introspection, `GetManagedObjects`). It knows nothing of
/// libdbus: signals leave through `emit`, so the dispatcher and the tree are
/// tested without a bus.
@LoopActor
public final class ObjectTree {
    private(set) var objects: [ObjectPath: ExportedObject] = [:]
    /// The path whose objects below are announced through ObjectManager.
    private(set) var objectManagerPath: ObjectPath?
    /// Where signals go: the connection, or a recorder in tests.
    var emit: (_ path: ObjectPath, _ interface: String, _ name: String, _ values: [DBusValue]) -> Void = {
        _, _, _, _ in
    }
    /// This machine's id, for `org.freedesktop.DBus.Peer.GetMachineId`.
    let machineID: () -> String

    init(machineID: @escaping () -> String) {
        self.machineID = machineID
    }

    func object(at path: ObjectPath) -> ExportedObject? { objects[path] }

    /// Exports interfaces (possibly of different owners) at `path`. An object below
    /// the ObjectManager path is announced with `InterfacesAdded`.
    @discardableResult
    func export(at path: ObjectPath, interfaces: [BoundInterface]) -> ExportedObject {
        let object = ExportedObject(path: path, interfaces: interfaces, tree: self)
        objects[path] = object
        if let manager = managerAbove(path) {
            emit(manager, StandardInterface.objectManager.name, "InterfacesAdded",
                 [.objectPath(path), object.interfacesAndProperties()])
        }
        return object
    }

    /// Removes the object at `path`, announcing it with `InterfacesRemoved`.
    func unexport(_ path: ObjectPath) {
        guard let object = objects.removeValue(forKey: path) else { return }
        if let manager = managerAbove(path) {
            emit(manager, StandardInterface.objectManager.name, "InterfacesRemoved",
                 [.objectPath(path), .strings(object.interfaces.map(\.name))])
        }
    }

    /// Serves `org.freedesktop.DBus.ObjectManager` at `path` for every object below it.
    func addObjectManager(at path: ObjectPath) { objectManagerPath = path }

    var count: Int { objects.count }

    func managerAbove(_ path: ObjectPath) -> ObjectPath? {
        guard let manager = objectManagerPath, path != manager,
            path.rawValue.hasPrefix(manager.rawValue == "/" ? "/" : manager.rawValue + "/")
        else { return nil }
        return manager
    }

    /// The standard interfaces `path` implements: Peer and Introspectable everywhere
    /// (tools walk the tree through paths that only lead to objects), Properties on
    /// objects, ObjectManager on the manager's object.
    func standardInterfaces(at path: ObjectPath) -> [StandardInterface] {
        guard objects[path] != nil else { return [.peer, .introspectable] }
        return path == objectManagerPath ? [.peer, .introspectable, .properties, .objectManager]
            : [.peer, .introspectable, .properties]
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
    /// them, the standard interfaces it implements, and its children.
    func introspect(_ path: ObjectPath) -> String {
        var xml = """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node>

            """
        for interface in objects[path]?.interfaces ?? [] {
            xml += interface.table.introspection + "\n"
        }
        for standard in standardInterfaces(at: path) {
            xml += standard.introspection
        }
        for child in childNames(of: path) {
            xml += "  <node name=\"\(child)\"/>\n"
        }
        xml += "</node>\n"
        return xml
    }
}

extension BusConnection {
    /// Exports `owner` at `path` with the given interface tables.
    @discardableResult
    public func export<Owner: AnyObject>(
        _ owner: Owner, at path: ObjectPath, interfaces: [Interface<Owner>]
    ) -> ExportedObject {
        tree.export(at: path, interfaces: interfaces.map { $0.bound(to: owner) })
    }

    /// Exports interfaces (possibly of different owners) at `path`. An object below
    /// the ObjectManager path is announced with `InterfacesAdded`.
    @discardableResult
    public func export(at path: ObjectPath, interfaces: [BoundInterface]) -> ExportedObject {
        tree.export(at: path, interfaces: interfaces)
    }

    /// Removes the object at `path`, announcing it with `InterfacesRemoved`.
    public func unexport(_ path: ObjectPath) { tree.unexport(path) }

    /// Serves `org.freedesktop.DBus.ObjectManager` at `path` for every object below it.
    public func addObjectManager(at path: ObjectPath) { tree.addObjectManager(at: path) }

    /// The number of exported objects.
    public var exportedObjectCount: Int { tree.count }
}
