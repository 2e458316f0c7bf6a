import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop

// Table entries made from the contract: names, signatures and change announcements
// come from `dbus/` (through the generated `Contract`), never spelled again here.

extension Method {
    init(_ member: ContractMethod,
         _ body: @escaping @LoopActor @Sendable (Owner, MethodCall) throws(BusError) -> [DBusValue]?) {
        self.init(member.name, input: member.input, output: member.output, body)
    }
}

extension Property {
    init(_ member: ContractProperty, _ get: @escaping @LoopActor @Sendable (Owner) -> DBusValue) {
        self.init(member.name, member.type, emits: EmitsChanged(rawValue: member.emitsChanged) ?? .yes, get)
    }

    /// A property `Properties.Set` may change (`access="readwrite"` in the contract).
    init(_ member: ContractProperty, _ get: @escaping @LoopActor @Sendable (Owner) -> DBusValue,
         set: @escaping @LoopActor @Sendable (Owner, DBusValue, MethodCall) throws(BusError) -> Void) {
        self.init(member.name, member.type, emits: EmitsChanged(rawValue: member.emitsChanged) ?? .yes, get,
                  set: set)
    }
}

extension Signal {
    init(_ member: ContractSignal) { self.init(member.name, signature: member.signature) }
}
