import ReachabilityLoop

/// The standard interfaces, as one table of their own members: which objects
/// implement each is `ObjectTree.standardInterfaces(at:)`, what each member
/// does is written here once, and the dispatcher treats them like any table.
/// None of them has properties, so `Properties.GetAll` of one is an empty
/// dictionary and `Get`/`Set` of anything in one is `UnknownProperty`, as the
/// D-Bus specification says. `Set` of a property without a setter is `PropertyReadOnly`.
@LoopActor
enum StandardInterface: CaseIterable, Sendable {
    case peer, introspectable, properties, objectManager

    /// One member of a standard interface.
    struct Method: Sendable {
        let name: String
        let input: String
        let output: String
        let invoke: @LoopActor @Sendable (ObjectTree, MethodCall) throws(BusError) -> [DBusValue]
    }

    var name: String {
        switch self {
        case .peer: "org.freedesktop.DBus.Peer"
        case .introspectable: "org.freedesktop.DBus.Introspectable"
        case .properties: "org.freedesktop.DBus.Properties"
        case .objectManager: "org.freedesktop.DBus.ObjectManager"
        }
    }

    static func named(_ name: String) -> StandardInterface? { allCases.first { $0.name == name } }

    func method(_ member: String) -> Method? { methods.first { $0.name == member } }

    var methods: [Method] {
        switch self {
        case .peer: Self.peerMethods
        case .introspectable: Self.introspectableMethods
        case .properties: Self.propertiesMethods
        case .objectManager: Self.objectManagerMethods
        }
    }

    // MARK: Members

    // libdbus answers Peer calls that name the interface itself; these serve calls without one.
    private static let peerMethods = [
        Method(name: "Ping", input: "", output: "") { _, _ in [] },
        Method(name: "GetMachineId", input: "", output: "s") { tree, _ in [.string(tree.machineID())] },
    ]

    private static let introspectableMethods = [
        Method(name: "Introspect", input: "", output: "s") { tree, call in
            [.string(tree.introspect(call.path, for: call.user))]
        },
    ]

    private static let objectManagerMethods = [
        Method(name: "GetManagedObjects", input: "", output: "a{oa{sa{sv}}}") { tree, call in
            [tree.managedObjects(call.path, for: call.user)]
        },
    ]

    private static let propertiesMethods = [
        Method(name: "Get", input: "ss", output: "v") { tree, call throws(BusError) in
            let (bound, index) = try property(tree, call)
            return [.variant(bound.value(index, for: call.user))]
        },
        Method(name: "GetAll", input: "s", output: "a{sv}") { tree, call throws(BusError) in
            let (_, scope) = try scope(tree, call, interface: call.string(0))
            guard let scope else { return [.vardict([])] }
            if scope.count == 1 { return [scope[0].allProperties(for: call.user)] }
            return [.vardict(scope.flatMap { i in
                i.table.properties.indices.map { (i.table.properties[$0].name, i.value($0, for: call.user)) }
            })]
        },
        Method(name: "Set", input: "ssv", output: "") { tree, call throws(BusError) in
            let (bound, index) = try property(tree, call)
            guard case .variant(let value) = try call.argument(2) else {
                throw .invalidArgs("Set takes the value as a variant")
            }
            try bound.set(index, value, call: call)
            return []
        },
    ]

    /// The interfaces whose properties `interface` names on the call's object: all of
    /// them for `""`, one of the object's own, or `nil` for a standard one it implements.
    private static func scope(_ tree: ObjectTree, _ call: MethodCall, interface: String) throws(BusError)
        -> (ExportedObject, [BoundInterface]?)
    {
        guard let object = tree.object(at: call.path, for: call.user) else {
            throw .unknownObject("no object at \(call.path.rawValue)")
        }
        if interface.isEmpty { return (object, object.interfaces) }
        if let bound = object.interface(interface) { return (object, [bound]) }
        if tree.standardInterfaces(at: call.path, for: call.user).contains(where: { $0.name == interface }) {
            return (object, nil)
        }
        throw .unknownInterface("\(call.path.rawValue) has no interface \(interface)")
    }

    /// The property `Get` or `Set` names: arguments 0 (interface) and 1 (name).
    private static func property(_ tree: ObjectTree, _ call: MethodCall) throws(BusError) -> (BoundInterface, Int) {
        let interface = try call.string(0)
        let name = try call.string(1)
        let (object, scope) = try scope(tree, call, interface: interface)
        for candidate in scope ?? [] {
            if let index = candidate.property(name) { return (candidate, index) }
        }
        let within = interface.isEmpty ? "" : " in \(interface)"
        throw .unknownProperty("\(object.path.rawValue) has no property \(name)\(within)")
    }

    // MARK: Introspection

    /// The `<interface>` element served for this interface.
    var introspection: String {
        switch self {
        case .peer:
            """
              <interface name="org.freedesktop.DBus.Peer">
                <method name="Ping"/>
                <method name="GetMachineId">
                  <arg type="s" name="machine_uuid" direction="out"/>
                </method>
              </interface>

            """
        case .introspectable:
            """
              <interface name="org.freedesktop.DBus.Introspectable">
                <method name="Introspect">
                  <arg name="xml_data" type="s" direction="out"/>
                </method>
              </interface>

            """
        case .properties:
            """
              <interface name="org.freedesktop.DBus.Properties">
                <method name="Get">
                  <arg name="interface_name" direction="in" type="s"/>
                  <arg name="property_name" direction="in" type="s"/>
                  <arg name="value" direction="out" type="v"/>
                </method>
                <method name="GetAll">
                  <arg name="interface_name" direction="in" type="s"/>
                  <arg name="props" direction="out" type="a{sv}"/>
                </method>
                <method name="Set">
                  <arg name="interface_name" direction="in" type="s"/>
                  <arg name="property_name" direction="in" type="s"/>
                  <arg name="value" direction="in" type="v"/>
                </method>
                <signal name="PropertiesChanged">
                  <arg type="s" name="interface_name"/>
                  <arg type="a{sv}" name="changed_properties"/>
                  <arg type="as" name="invalidated_properties"/>
                </signal>
              </interface>

            """
        case .objectManager:
            """
              <interface name="org.freedesktop.DBus.ObjectManager">
                <method name="GetManagedObjects">
                  <arg type="a{oa{sa{sv}}}" name="object_paths_interfaces_and_properties" direction="out"/>
                </method>
                <signal name="InterfacesAdded">
                  <arg type="o" name="object_path"/>
                  <arg type="a{sa{sv}}" name="interfaces_and_properties"/>
                </signal>
                <signal name="InterfacesRemoved">
                  <arg type="o" name="object_path"/>
                  <arg type="as" name="interfaces"/>
                </signal>
              </interface>

            """
        }
    }
}
