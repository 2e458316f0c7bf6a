import Logging
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
    /// What was last announced (or first exported), as a hash per value: per interface, in
    /// the order of its table's `announcedIndices`. The values themselves are read from the
    /// owner when they are sent; what is kept is only what tells a change (some 8 bytes a
    /// property instead of the value and what it holds, for each of thousands of objects).
    private var announced: Fingerprint
    /// The same for the listeners of each user that sees a view of its own
    /// (`ViewedByUser`), until the user sees the shared values again.
    private var announcedToUser: [UserID: Fingerprint] = [:]
    /// While set, changes are taken as told without being sent: a service that has not yet
    /// taken its well-known name has nobody to tell (its clients listen by that name), and
    /// says everything once it has (`announceEverything`).
    public var isQuiet = false

    init(path: ObjectPath, interfaces: [BoundInterface], tree: ObjectTree, audience: ObjectAudience?) {
        self.path = path
        self.interfaces = interfaces
        self.tree = tree
        self.audience = audience
        announced = Self.fingerprint(Self.values(of: interfaces) { $0.value($1) })
    }

    func interface(_ name: String) -> BoundInterface? { interfaces.first { $0.name == name } }

    /// The interfaces' names (for `InterfacesRemoved`).
    var interfaceNames: [String] { interfaces.map(\.name) }

    /// What a peer was told of the announced properties, compactly (a hash per value): what
    /// every listener was told, and what a peer that falls behind was told last, to send it
    /// what differs once it reads again.
    /// One array for all the interfaces, in order (one allocation per object).
    typealias Fingerprint = [Int]

    static func fingerprint(_ values: [[DBusValue]]) -> Fingerprint { values.flatMap { $0.map(\.hashValue) } }

    /// The fingerprint of what `peer`, if up to date, has been told.
    func told(to peer: String) -> Fingerprint {
        guard let user = ownView(of: peer) else { return announced }
        return announcedToUser[user] ?? Self.fingerprint(current(for: peer))
    }

    /// Emits `PropertiesChanged` for each interface whose announced properties changed
    /// since the last call, carrying only those properties, then the interface's follow-up
    /// signal if one of its arguments changed. Listeners of a user with a view of its own
    /// (`ViewedByUser`) hear what changed in that view. A listener that has fallen behind
    /// is sent nothing now: the tree keeps what it was last told, and it gets what differs
    /// once it reads again.
    public func propertiesChanged() {
        guard let audience else { return publish(&announced, to: nil) { $0.value($1) } }
        var shared = audience.listeners
        if interfaces.contains(where: { $0.owner is ViewedByUser }) {
            let byUser = audience.listenersByUser
            for (user, names) in byUser where announcedToUser[user] != nil || seesOwnView(user) {
                shared.removeAll { names.contains($0) }
                var last = announcedToUser[user] ?? announced
                publish(&last, to: names) { $0.value($1, for: user) }
                announcedToUser[user] = seesOwnView(user) ? last : nil
            }
            for user in announcedToUser.keys where byUser[user] == nil { announcedToUser[user] = nil }
        }
        publish(&announced, to: shared) { $0.value($1) }
    }

    /// Announces every property of the interface named `interfaceName` as though each had
    /// just changed — one `PropertiesChanged` with all of them, then the interface's
    /// follow-up — to everybody: what a service says once it has taken its well-known name,
    /// so that a client subscribed by that name learns the new instance's state without
    /// asking. Only for an object everybody hears (no audience: its listeners are the bus's
    /// match rules, and nobody is owed anything).
    public func announceEverything(of interfaceName: String) {
        guard audience == nil, let index = interfaces.firstIndex(where: { $0.name == interfaceName }) else { return }
        let values = Self.values(of: interfaces) { $0.value($1) }
        announced = Self.fingerprint(values)
        announce([Change(interface: index, slots: Array(values[index].indices))], values: values, to: nil)
    }

    private func seesOwnView(_ user: UserID) -> Bool {
        interfaces.contains { ($0.owner as? ViewedByUser).map { $0.view(for: user) !== $0 } ?? false }
    }

    /// What differs from `last` (then updated) to `listeners` (`nil`: everybody), or kept
    /// for those of them that have fallen behind, with what they were told before.
    private func publish(_ last: inout Fingerprint, to listeners: [String]?,
                         _ value: (BoundInterface, Int) -> DBusValue) {
        let values = Self.values(of: interfaces, value)
        let changes = self.changes(from: last, to: values)
        guard !changes.isEmpty else { return }
        let before = last
        last = Self.fingerprint(values)
        guard !isQuiet else { return }
        guard let listeners else { return announce(changes, values: values, to: nil) }
        var current: [String] = []
        for listener in listeners {
            guard tree.isBehind(listener) else {
                current.append(listener)
                continue
            }
            tree.withhold(path, from: listener, told: before, interfaces: interfaceNames)
        }
        announce(changes, values: values, to: current)
    }

    /// The announced properties whose `values` differ from what `told` says was told.
    private func changes(from told: Fingerprint, to values: [[DBusValue]]) -> [Change] {
        var changes: [Change] = []
        var offset = 0
        for i in interfaces.indices {
            var change = Change(interface: i)
            for slot in values[i].indices where told[offset + slot] != values[i][slot].hashValue {
                change.slots.append(slot)
            }
            offset += values[i].count
            if !change.slots.isEmpty { changes.append(change) }
        }
        return changes
    }

    /// The announced properties of one interface (by index) that changed, by slot.
    private struct Change {
        let interface: Int
        var slots: [Int] = []
    }

    /// Sends `changes` of `values` — one `PropertiesChanged` per interface, then the
    /// interface's follow-up if one of its arguments is among them — to `destinations`
    /// (`nil`: everybody).
    private func announce(_ changes: [Change], values: [[DBusValue]], to destinations: [String]?) {
        guard destinations?.isEmpty != true else { return }
        for change in changes {
            let interface = interfaces[change.interface]
            let table = interface.table
            let changed = change.slots.map { (table.properties[table.announcedIndices[$0]].name,
                                              values[change.interface][$0]) }
            let invalidated = table.properties.filter { $0.emits == .invalidates }.map(\.name)
            tree.emit(path, StandardInterface.properties.name, "PropertiesChanged",
                      [.string(interface.name), .vardict(changed), .strings(invalidated)], destinations)
            if let followUp = table.followUp, followUp.slots.contains(where: change.slots.contains) {
                send(followUp.signal, interface: interface.name,
                     followUp.slots.map { values[change.interface][$0] }, to: destinations)
            }
        }
    }

    /// The user of `peer` when it sees a view of its own (`ViewedByUser`).
    private func ownView(of peer: String) -> UserID? {
        guard interfaces.contains(where: { $0.owner is ViewedByUser }), let user = tree.userOf(peer),
            seesOwnView(user)
        else { return nil }
        return user
    }

    /// The announced values of `interfaces`, per interface, as `value` reads them.
    private static func values(of interfaces: [BoundInterface], _ value: (BoundInterface, Int) -> DBusValue)
        -> [[DBusValue]]
    {
        interfaces.map { i in i.table.announcedIndices.map { value(i, $0) } }
    }

    /// The announced values `peer` would hear now: its user's view, or the shared values.
    private func current(for peer: String) -> [[DBusValue]] {
        guard let user = ownView(of: peer) else { return Self.values(of: interfaces) { $0.value($1) } }
        return Self.values(of: interfaces) { $0.value($1, for: user) }
    }

    /// `user`'s listeners were just told this object's properties as their user sees them
    /// (`InterfacesAdded` with its own view): the changes announced to them from now on are
    /// counted from that, not from the shared values (a view that then comes to equal the
    /// shared answer is a change to them). A user told before keeps what it was told.
    func toldOwnView(to user: UserID) {
        guard announcedToUser[user] == nil, seesOwnView(user) else { return }
        announcedToUser[user] = Self.fingerprint(Self.values(of: interfaces) { $0.value($1, for: user) })
    }

    /// Of `listeners`, those of each user that sees a view of its own (`ViewedByUser`); the
    /// others hear the shared values.
    func ownViews(among listeners: [String]) -> [UserID: [String]] {
        guard let audience, interfaces.contains(where: { $0.owner is ViewedByUser }) else { return [:] }
        var result: [UserID: [String]] = [:]
        for (user, names) in audience.listenersByUser where seesOwnView(user) {
            let mine = names.filter(listeners.contains)
            if !mine.isEmpty { result[user] = mine }
        }
        return result
    }

    /// Brings `peer`, which was last told `told` of this object, up to date: one
    /// `PropertiesChanged` per interface with every property that differs now (in what its
    /// user sees), and the follow-up if one of its arguments differs.
    func catchUp(_ peer: String, told: Fingerprint) {
        let values = current(for: peer)
        announce(changes(from: told, to: values), values: values, to: [peer])
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
            tree.logger.error("\(path) does not declare \(interface).\(signal.name)")
            return
        }
        guard values.signature == signal.signature else {
            tree.logger.error(
                "\(interface).\(signal.name) sent with '\(values.signature)', declared '\(signal.signature)'")
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
