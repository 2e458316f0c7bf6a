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
    /// The signal that follows a change of its argument properties, and the slots of those
    /// properties in `announcedIndices`.
    let followUp: (signal: Signal, slots: [Int])?

    init<Owner: AnyObject>(
        name: String, methods: [Method<Owner>], properties: [Property<Owner>], signals: [Signal],
        followUp: FollowUp?, introspection: String
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
        let announced = erasedProperties.indices.filter { erasedProperties[$0].emits == .yes }
        announcedIndices = announced
        self.followUp = followUp.map { followUp in
            let slots = followUp.arguments.map { name in
                guard let slot = announced.firstIndex(where: { erasedProperties[$0].name == name }) else {
                    preconditionFailure("\(name), an argument of \(followUp.signal.name), is not an announced property")
                }
                return slot
            }
            precondition(slots.map { erasedProperties[announced[$0]].signature }.joined() == followUp.signal.signature,
                         "\(followUp.signal.name)'s arguments are not its properties' types")
            return (followUp.signal, slots)
        }
    }
}

/// One interface table with its owner bound in, ready to export.
@LoopActor
public struct BoundInterface {
    let table: ErasedInterface
    let owner: AnyObject

    var name: String { table.name }

    func value(_ index: Int) -> DBusValue { table.properties[index].get(owner) }

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

    /// All properties as `a{sv}`.
    func allProperties() -> DBusValue {
        .vardict(table.properties.indices.map { (table.properties[$0].name, value($0)) })
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
    let audience: ObjectAudience?
    /// The values last announced (or first exported): per interface, in the order
    /// of its table's `announcedIndices`.
    private var announced: [[DBusValue]]

    init(path: ObjectPath, interfaces: [BoundInterface], tree: ObjectTree, audience: ObjectAudience?) {
        self.path = path
        self.interfaces = interfaces
        self.tree = tree
        self.audience = audience
        announced = interfaces.map { i in i.table.announcedIndices.map { i.value($0) } }
    }

    func interface(_ name: String) -> BoundInterface? { interfaces.first { $0.name == name } }

    /// The interfaces' names (for `InterfacesRemoved`).
    var interfaceNames: [String] { interfaces.map(\.name) }

    /// What a peer was told of the announced properties, compactly (a hash per value): kept
    /// for a peer that falls behind, to send it what differs once it reads again.
    typealias Fingerprint = [[Int]]

    /// The fingerprint of what a peer that is up to date has been told.
    var told: Fingerprint { announced.map { $0.map(\.hashValue) } }

    /// Emits `PropertiesChanged` for each interface whose announced properties
    /// changed since the last call, carrying only those properties, then the follow-up
    /// signal if one of its properties changed. A listener that has fallen behind is sent
    /// nothing now: the tree keeps what it was last told, and it gets what differs once it
    /// reads again.
    public func propertiesChanged() {
        let before = announced
        var changes: [Change] = []
        for (i, interface) in interfaces.enumerated() {
            var change = Change(interface: i)
            for (slot, index) in interface.table.announcedIndices.enumerated() {
                let value = interface.value(index)
                if announced[i][slot] != value {
                    announced[i][slot] = value
                    change.slots.append(slot)
                }
            }
            if !change.slots.isEmpty { changes.append(change) }
        }
        guard !changes.isEmpty else { return }
        var destinations: [String]?
        if let audience {
            var current: [String] = []
            var toldBefore: Fingerprint?
            for listener in audience.listeners {
                guard tree.isBehind(listener) else {
                    current.append(listener)
                    continue
                }
                if toldBefore == nil { toldBefore = before.map { $0.map(\.hashValue) } }
                tree.withhold(path, from: listener, told: toldBefore!, interfaces: interfaceNames)
            }
            destinations = current
        }
        announce(changes, to: destinations)
    }

    /// The announced properties of one interface (by index) that changed, by slot.
    private struct Change {
        let interface: Int
        var slots: [Int] = []
    }

    /// Sends `changes` — one `PropertiesChanged` per interface, then the interface's
    /// follow-up if one of its arguments is among them — to `destinations` (`nil`: everybody).
    private func announce(_ changes: [Change], to destinations: [String]?) {
        guard destinations?.isEmpty != true else { return }
        for change in changes {
            let interface = interfaces[change.interface]
            let table = interface.table
            let changed = change.slots.map { (table.properties[table.announcedIndices[$0]].name,
                                              announced[change.interface][$0]) }
            let invalidated = table.properties.filter { $0.emits == .invalidates }.map(\.name)
            tree.emit(path, StandardInterface.properties.name, "PropertiesChanged",
                      [.string(interface.name), .vardict(changed), .strings(invalidated)], destinations)
            if let followUp = table.followUp, followUp.slots.contains(where: change.slots.contains) {
                send(followUp.signal, interface: interface.name,
                     followUp.slots.map { announced[change.interface][$0] }, to: destinations)
            }
        }
    }

    /// Brings `peer`, which was last told `told` of this object, up to date: one
    /// `PropertiesChanged` per interface with every property that differs now, and the
    /// follow-up if one of its arguments differs.
    func catchUp(_ peer: String, told: Fingerprint) {
        var changes: [Change] = []
        for (i, interface) in interfaces.enumerated() {
            var change = Change(interface: i)
            for slot in interface.table.announcedIndices.indices where told[i][slot] != announced[i][slot].hashValue {
                change.slots.append(slot)
            }
            if !change.slots.isEmpty { changes.append(change) }
        }
        announce(changes, to: [peer])
    }

    /// Emits one of the object's declared signals. Arguments that do not match
    /// the declared signature are a programming error: logged, not sent.
    public func emit(_ signal: Signal, interface: String, _ values: [DBusValue]) {
        emit(signal, interface: interface, values, to: audience?.listeners)
    }

    /// The same, sent to `destinations` only (unique names; `nil`: broadcast). A
    /// destination that has fallen behind is sent it (with the latest values) once it
    /// reads again.
    public func emit(_ signal: Signal, interface: String, _ values: [DBusValue], to destinations: [String]?) {
        guard let destinations else { return send(signal, interface: interface, values, to: nil) }
        var current: [String] = []
        for destination in destinations {
            if tree.isBehind(destination) {
                tree.owe(signal, interface: interface, values, on: self, to: destination)
            } else {
                current.append(destination)
            }
        }
        send(signal, interface: interface, values, to: current)
    }

    /// Sends a declared signal, checked against its declaration.
    func send(_ signal: Signal, interface: String, _ values: [DBusValue], to destinations: [String]?) {
        guard destinations?.isEmpty != true else { return }
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

    /// `a{sa{sv}}`: every interface with its properties (for ObjectManager).
    func interfacesAndProperties() -> DBusValue {
        .dictionary(keySignature: "s", valueSignature: "a{sv}",
                    interfaces.map { .init(.string($0.name), $0.allProperties()) })
    }
}

extension Interface {
    /// This table with `owner` bound in, for `BusConnection.export(at:interfaces:)`.
    @LoopActor public func bound(to owner: Owner) -> BoundInterface { BoundInterface(table: erased, owner: owner) }
}
