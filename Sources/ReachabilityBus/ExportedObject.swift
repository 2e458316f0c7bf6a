import ReachabilityCore
import ReachabilityLoop

/// An interface table with its owner's type erased, built once per table and
/// shared by every object exported with it.
final class ErasedInterface: Sendable {
    struct ErasedMethod: Sendable {
        let input: String
        let output: String
        let invoke: @LoopActor @Sendable (AnyObject, MethodCall) throws(BusError) -> [DBusValue]?
    }
    struct ErasedProperty: Sendable {
        let name: String
        let signature: String
        let emits: EmitsChanged
        let get: @LoopActor @Sendable (AnyObject) -> DBusValue
        let set: (@LoopActor @Sendable (AnyObject, DBusValue, MethodCall) throws(BusError) -> Void)?
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
            var erasedSet: (@LoopActor @Sendable (AnyObject, DBusValue, MethodCall) throws(BusError) -> Void)?
            if let set = p.set {
                erasedSet = { owner, value, call throws(BusError) in
                    try set(unsafeDowncast(owner, to: Owner.self), value, call)
                }
            }
            return ErasedProperty(name: p.name, signature: p.signature, emits: p.emits,
                                  get: { p.get(unsafeDowncast($0, to: Owner.self)) }, set: erasedSet)
        }
        let erasedProperties = self.properties
        propertyIndex = Dictionary(uniqueKeysWithValues: erasedProperties.enumerated().map { ($1.name, $0) })
        self.signals = Dictionary(uniqueKeysWithValues: signals.map { ($0.name, $0) })
        self.introspection = introspection
        announcedIndices = erasedProperties.indices.filter { erasedProperties[$0].emits == .yes }
    }
}

/// One interface table with its owner bound in, ready to export.
@LoopActor
public struct BoundInterface {
    let table: ErasedInterface
    let owner: AnyObject

    var name: String { table.name }

    func value(_ index: Int) -> DBusValue { table.properties[index].get(owner) }

    /// The value callers of `user` see (`ViewedByUser`).
    func value(_ index: Int, for user: UserID) -> DBusValue {
        table.properties[index].get((owner as? ViewedByUser)?.view(for: user) ?? owner)
    }

    /// `Properties.Set`: a writable property takes a value of its own type.
    func set(_ index: Int, _ value: DBusValue, call: MethodCall) throws(BusError) {
        let property = table.properties[index]
        guard let set = property.set else {
            throw .propertyReadOnly("property \(property.name) of \(name) is read-only")
        }
        guard value.signature == property.signature else {
            throw .invalidArgs("property \(property.name) of \(name) is of type '\(property.signature)', "
                               + "not '\(value.signature)'")
        }
        try set(owner, value, call)
    }

    func property(_ name: String) -> Int? { table.propertyIndex[name] }

    /// All properties as `a{sv}`, as callers of `user` see them (`nil`: the shared values).
    func allProperties(for user: UserID? = nil) -> DBusValue {
        .vardict(table.properties.indices.map { index in
            (table.properties[index].name, user.map { value(index, for: $0) } ?? value(index))
        })
    }
}

/// An object on the bus. Its owner calls `propertiesChanged()` after any state
/// change; this object works out which properties changed and announces only those.
@LoopActor
public final class ExportedObject {
    public let path: ObjectPath
    let interfaces: [BoundInterface]
    private unowned let tree: ObjectTree
    /// Who may see the object and hears its signals; `nil`: everybody.
    public let audience: ObjectAudience?
    /// The values last announced (or first exported): per interface, in the order
    /// of its table's `announcedIndices`.
    private var announced: [[DBusValue]]
    /// The values last announced to the listeners of each user that sees a view of its
    /// own (`ViewedByUser`), until the user sees the shared values again.
    private var announcedToUser: [UserID: [[DBusValue]]] = [:]

    init(path: ObjectPath, interfaces: [BoundInterface], tree: ObjectTree, audience: ObjectAudience?) {
        self.path = path
        self.interfaces = interfaces
        self.tree = tree
        self.audience = audience
        announced = interfaces.map { i in i.table.announcedIndices.map { i.value($0) } }
    }

    func interface(_ name: String) -> BoundInterface? { interfaces.first { $0.name == name } }

    /// Emits `PropertiesChanged` for each interface whose announced properties
    /// changed since the last call, carrying only those properties. Listeners of a
    /// user with a view of its own (`ViewedByUser`) hear what changed in that view.
    public func propertiesChanged() {
        var shared = audience?.listeners
        if let audience, interfaces.contains(where: { $0.owner is ViewedByUser }) {
            let byUser = audience.listenersByUser
            for (user, names) in byUser where announcedToUser[user] != nil || seesOwnView(user) {
                shared?.removeAll { names.contains($0) }
                var last = announcedToUser[user] ?? announced
                announce(&last, to: names) { $0.value($1, for: user) }
                announcedToUser[user] = seesOwnView(user) ? last : nil
            }
            for user in announcedToUser.keys where byUser[user] == nil { announcedToUser[user] = nil }
        }
        announce(&announced, to: shared) { $0.value($1) }
    }

    private func seesOwnView(_ user: UserID) -> Bool {
        interfaces.contains { ($0.owner as? ViewedByUser).map { $0.view(for: user) !== $0 } ?? false }
    }

    /// `PropertiesChanged` to `destinations` for what differs from `last` (then updated).
    private func announce(_ last: inout [[DBusValue]], to destinations: [String]?,
                          _ value: (BoundInterface, Int) -> DBusValue) {
        if destinations?.isEmpty == true { return }
        for (i, interface) in interfaces.enumerated() {
            var changed: [(String, DBusValue)] = []
            for (slot, index) in interface.table.announcedIndices.enumerated() {
                let value = value(interface, index)
                if last[i][slot] != value {
                    last[i][slot] = value
                    changed.append((interface.table.properties[index].name, value))
                }
            }
            guard !changed.isEmpty else { continue }
            let invalidated = interface.table.properties.filter { $0.emits == .invalidates }.map(\.name)
            tree.emit(path, StandardInterface.properties.name, "PropertiesChanged",
                      [.string(interface.name), .vardict(changed), .strings(invalidated)], destinations)
        }
    }

    /// Emits one of the object's declared signals. Arguments that do not match
    /// the declared signature are a programming error: logged, not sent.
    public func emit(_ signal: Signal, interface: String, _ values: [DBusValue]) {
        emit(signal, interface: interface, values, to: audience?.listeners)
    }

    /// The same, sent to `destinations` only (unique names; `nil`: broadcast).
    public func emit(_ signal: Signal, interface: String, _ values: [DBusValue], to destinations: [String]?) {
        guard self.interface(interface)?.table.signals[signal.name] == signal else {
            Log.error("\(path) does not declare \(interface).\(signal.name)")
            return
        }
        guard values.signature == signal.signature else {
            Log.error("\(interface).\(signal.name) sent with '\(values.signature)', declared '\(signal.signature)'")
            return
        }
        tree.emit(path, interface, signal.name, values, destinations)
    }

    /// `a{sa{sv}}`: every interface with its properties (for ObjectManager), as callers of
    /// `user` see them (`nil`: the shared values).
    func interfacesAndProperties(for user: UserID? = nil) -> DBusValue {
        .dictionary(keySignature: "s", valueSignature: "a{sv}",
                    interfaces.map { .init(.string($0.name), $0.allProperties(for: user)) })
    }
}

extension Interface {
    /// This table with `owner` bound in, for `BusConnection.export(at:interfaces:)`.
    @LoopActor public func bound(to owner: Owner) -> BoundInterface { BoundInterface(table: erased, owner: owner) }
}
