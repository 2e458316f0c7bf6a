import Logging
import ReachabilityCore
import ReachabilityLoop

/// Who may see an exported object and who hears its signals. An object without
/// one is public: everybody sees it and its signals are broadcast. Root sees
/// every object.
@LoopActor
public protocol ObjectAudience: AnyObject {
    /// Whether callers of `user` may see the object.
    func admits(_ user: UserID) -> Bool
    /// The unique names the object's signals are sent to.
    var listeners: [String] { get }
    /// Whether `peer` is one of the listeners.
    func hears(_ peer: String) -> Bool
    /// The same, with each one's user: what an object whose properties depend on who
    /// asks (`ViewedByUser`) needs to tell each listener its own values.
    var listenersByUser: [UserID: [String]] { get }
}

extension ObjectAudience {
    public func hears(_ peer: String) -> Bool { listeners.contains(peer) }
    /// No listener has a view of its own.
    public var listenersByUser: [UserID: [String]] { [:] }
}

/// The seam for answers that depend on who asks: an object owner whose property
/// values differ per caller's user. `Get`, `GetAll`, `GetManagedObjects` read a
/// caller's properties from `view(for: call.user)`; `PropertiesChanged` tells each
/// listener what changed in its own user's view (`ExportedObject.propertiesChanged`).
@LoopActor
public protocol ViewedByUser: AnyObject {
    /// The owner whose properties callers of `user` read: the object's own owner when
    /// they see the shared values, else one of the same type.
    func view(for user: UserID) -> AnyObject
}

/// The objects a connection exports, by path, and what the standard interfaces
/// say about them (introspection, `GetManagedObjects`). It knows nothing of
/// libdbus: signals leave through `emit`, so the dispatcher and the tree are
/// tested without a bus.
@LoopActor
public final class ObjectTree {
    private(set) var objects: [ObjectPath: ExportedObject] = [:]
    /// The path whose objects below are announced through ObjectManager.
    private(set) var objectManagerPath: ObjectPath?
    /// Where signals go: the connection, or a recorder in tests. `destinations` is
    /// `nil` for a broadcast, else the unique names the signal is sent to.
    var emit: (_ path: ObjectPath, _ interface: String, _ name: String, _ values: [DBusValue],
               _ destinations: [String]?) -> Void = { _, _, _, _, _ in }
    /// This machine's id, for `org.freedesktop.DBus.Peer.GetMachineId`.
    let machineID: () -> String
    /// Whether a peer has fallen behind (it is not reading what it is sent): the
    /// connection's ledger, or a test's.
    var isBehind: (String) -> Bool = { _ in false }
    /// The Unix user of a peer, if known (what a peer catching up sees depends on it).
    var userOf: (String) -> UserID? = { _ in nil }
    /// What each peer that fell behind has not been told (see `withhold`).
    var withheld: [String: [ObjectPath: Withheld]] = [:]
    /// Where the objects log (a signal that does not match its declaration).
    let logger: Logger

    init(machineID: @escaping () -> String, logger: Logger) {
        self.machineID = machineID
        self.logger = logger
    }

    /// The object at `path`, whoever may see it.
    func object(at path: ObjectPath) -> ExportedObject? { objects[path] }

    /// The object at `path` if callers of `user` may see it.
    func object(at path: ObjectPath, for user: UserID) -> ExportedObject? {
        guard let object = objects[path], isVisible(object, to: user) else { return nil }
        return object
    }

    func isVisible(_ object: ExportedObject, to user: UserID) -> Bool {
        user == 0 || object.audience?.admits(user) ?? true
    }

    /// Exports interfaces (possibly of different owners) at `path`. An object below
    /// the ObjectManager path is announced with `InterfacesAdded`, to its audience.
    @discardableResult
    func export(at path: ObjectPath, interfaces: [BoundInterface], audience: ObjectAudience? = nil) -> ExportedObject {
        let object = ExportedObject(path: path, interfaces: interfaces, tree: self, audience: audience)
        objects[path] = object
        announceAdded(path, to: audience?.listeners)
        return object
    }

    /// Removes the object at `path`, announcing it with `InterfacesRemoved` to
    /// `listeners` (by default its audience's, or everybody).
    func unexport(_ path: ObjectPath, to listeners: [String]? = nil) {
        guard let object = objects[path] else { return }
        announceRemoved(path, to: listeners ?? object.audience?.listeners)
        objects[path] = nil
    }

    /// `InterfacesAdded` for the object at `path` (below the ObjectManager path) to
    /// `listeners` (`nil`: everybody): it is there for them now.
    func announceAdded(_ path: ObjectPath, to listeners: [String]?) {
        guard let manager = managerAbove(path), let object = objects[path] else { return }
        let current = listeners.map { $0.filter { !isBehind($0) || withholdAdded(path, from: $0) } }
        guard current?.isEmpty != true else { return }
        // Each listener gets the properties its own user sees (`ViewedByUser`).
        var shared = current
        if let current {
            for (user, mine) in object.ownViews(among: current) {
                shared?.removeAll { mine.contains($0) }
                emit(manager, StandardInterface.objectManager.name, "InterfacesAdded",
                     [.objectPath(path), object.interfacesAndProperties(for: user)], mine)
                object.toldOwnView(to: user)
            }
        }
        guard shared?.isEmpty != true else { return }
        emit(manager, StandardInterface.objectManager.name, "InterfacesAdded",
             [.objectPath(path), object.interfacesAndProperties()], shared)
    }

    /// `InterfacesRemoved` for the object at `path` to `listeners` (`nil`: everybody):
    /// it is gone for them.
    func announceRemoved(_ path: ObjectPath, to listeners: [String]?) {
        guard let manager = managerAbove(path), let object = objects[path] else { return }
        let current = listeners.map { $0.filter { !isBehind($0) || withholdRemoved(object, from: $0) } }
        guard current?.isEmpty != true else { return }
        emit(manager, StandardInterface.objectManager.name, "InterfacesRemoved",
             [.objectPath(path), .strings(object.interfaceNames)], current)
    }

    /// Serves `org.freedesktop.DBus.ObjectManager` at `path` for every object below it.
    func addObjectManager(at path: ObjectPath) { objectManagerPath = path }

    func compact() { objects.shrinkIfSparse() }

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
    func standardInterfaces(at path: ObjectPath, for user: UserID) -> [StandardInterface] {
        guard object(at: path, for: user) != nil else { return [.peer, .introspectable] }
        return path == objectManagerPath ? [.peer, .introspectable, .properties, .objectManager]
            : [.peer, .introspectable, .properties]
    }

    /// The objects managed by `manager` that callers of `user` may see, as `a{oa{sa{sv}}}`.
    func managedObjects(_ manager: ObjectPath, for user: UserID) -> DBusValue {
        let entries = objects.filter { isVisible($0.value, to: user) && managerAbove($0.key) == manager }
            .sorted { $0.key < $1.key }
            .map { DBusValue.DictionaryEntry(.objectPath($0.key), $0.value.interfacesAndProperties(for: user)) }
        return .dictionary(keySignature: "o", valueSignature: "a{sa{sv}}", entries)
    }

    /// The names of the direct children of `path` among the paths callers of `user` may see.
    func childNames(of path: ObjectPath, for user: UserID) -> [String] {
        let prefix = path.rawValue == "/" ? "/" : path.rawValue + "/"
        var names = Set<String>()
        for (p, object) in objects where p.rawValue.hasPrefix(prefix) && p != path && isVisible(object, to: user) {
            let rest = p.rawValue.dropFirst(prefix.count)
            names.insert(String(rest.prefix { $0 != "/" }))
        }
        return names.sorted()
    }

    /// Introspection data for `path` as callers of `user` may see it: its interfaces
    /// as the contract documents them, the standard interfaces it implements, and
    /// its children. An object the user may not see is introspected as no object.
    func introspect(_ path: ObjectPath, for user: UserID) -> String {
        var xml = """
            <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">
            <node>

            """
        for interface in object(at: path, for: user)?.interfaces ?? [] {
            xml += interface.table.introspection + "\n"
        }
        for standard in standardInterfaces(at: path, for: user) {
            xml += standard.introspection
        }
        for child in childNames(of: path, for: user) {
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
        _ owner: Owner, at path: ObjectPath, interfaces: [Interface<Owner>], audience: ObjectAudience? = nil
    ) -> ExportedObject {
        tree.export(at: path, interfaces: interfaces.map { $0.bound(to: owner) }, audience: audience)
    }

    /// Exports interfaces (possibly of different owners) at `path`. An object below
    /// the ObjectManager path is announced with `InterfacesAdded`. An object with an
    /// `audience` is seen by it (and root) only, and its signals go to its listeners.
    @discardableResult
    public func export(at path: ObjectPath, interfaces: [BoundInterface], audience: ObjectAudience? = nil)
        -> ExportedObject
    {
        tree.export(at: path, interfaces: interfaces, audience: audience)
    }

    /// Removes the object at `path`, announcing it with `InterfacesRemoved` to `listeners`
    /// (by default its audience's listeners, or everybody).
    public func unexport(_ path: ObjectPath, to listeners: [String]? = nil) { tree.unexport(path, to: listeners) }

    /// Announces the object at `path` to listeners that can see it from now on.
    public func announceAdded(_ path: ObjectPath, to listeners: [String]) { tree.announceAdded(path, to: listeners) }

    /// Announces the object at `path` as gone to listeners that cannot see it any more.
    public func announceRemoved(_ path: ObjectPath, to listeners: [String]) {
        tree.announceRemoved(path, to: listeners)
    }

    /// Serves `org.freedesktop.DBus.ObjectManager` at `path` for every object below it.
    public func addObjectManager(at path: ObjectPath) { tree.addObjectManager(at: path) }

    /// The number of exported objects.
    public var exportedObjectCount: Int { tree.count }

    /// Gives back the storage left by many unexported objects.
    public func compactObjects() { tree.compact() }
}
