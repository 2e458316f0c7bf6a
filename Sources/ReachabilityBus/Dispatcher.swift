/// Finds what handles a method call, checking the object, interface, member and
/// argument signature, and implements the standard interfaces on top of the tables.
enum Dispatcher {
    struct Target {
        let interface: String
        let output: String
        let invoke: (MethodCall) throws(BusError) -> [DBusValue]?
    }

    static func resolve(
        connection: BusConnection, path: ObjectPath, interface: String, member: String, signature: String
    ) -> Result<Target, BusError> {
        func expecting(_ input: String, _ output: String, _ iface: String,
                       _ invoke: @escaping (MethodCall) throws(BusError) -> [DBusValue]?) -> Result<Target, BusError> {
            guard signature == input else {
                return .failure(.invalidArgs(
                    "\(iface).\(member) takes arguments of signature '\(input)', not '\(signature)'"))
            }
            return .success(Target(interface: iface, output: output, invoke: invoke))
        }

        // Introspection works on every path, so tools can walk the tree.
        if member == "Introspect" && (interface == StandardInterfaces.introspectable || interface.isEmpty) {
            return expecting("", "s", StandardInterfaces.introspectable) { _ in
                [.string(connection.introspect(path))]
            }
        }

        guard let object = connection.objects[path] else {
            return .failure(.unknownObject("no object at \(path.rawValue)"))
        }

        switch interface {
        case StandardInterfaces.properties:
            return properties(object, member: member, expecting: expecting)
        case StandardInterfaces.objectManager where path == connection.objectManagerPath:
            guard member == "GetManagedObjects" else { break }
            return expecting("", "a{oa{sa{sv}}}", interface) { _ in [connection.managedObjects(path)] }
        case StandardInterfaces.introspectable, StandardInterfaces.objectManager:
            break
        case "":
            // No interface given: the first interface with that member.
            for candidate in object.interfaces {
                if let method = candidate.table.methods[member] {
                    let owner = candidate.owner
                    return expecting(method.input, method.output, candidate.name) { call throws(BusError) in
                        try method.invoke(owner, call)
                    }
                }
            }
        default:
            guard let bound = object.interface(interface) else {
                return .failure(.unknownInterface("\(path.rawValue) has no interface \(interface)"))
            }
            if let method = bound.table.methods[member] {
                let owner = bound.owner
                return expecting(method.input, method.output, interface) { call throws(BusError) in
                    try method.invoke(owner, call)
                }
            }
        }
        return .failure(.unknownMethod(
            "\(path.rawValue) has no method \(member)\(interface.isEmpty ? "" : " in \(interface)")"))
    }

    private static func properties(
        _ object: ExportedObject, member: String,
        expecting: (String, String, String, @escaping (MethodCall) throws(BusError) -> [DBusValue]?)
            -> Result<Target, BusError>
    ) -> Result<Target, BusError> {
        let iface = StandardInterfaces.properties
        func lookup(_ call: MethodCall) throws(BusError) -> (BoundInterface?, String) {
            let name = call.string(0)
            if name.isEmpty { return (nil, call.string(1)) }
            if let bound = object.interface(name) { return (bound, call.string(1)) }
            if [StandardInterfaces.properties, StandardInterfaces.introspectable, StandardInterfaces.peer,
                StandardInterfaces.objectManager].contains(name)
            {
                return (nil, call.string(1))
            }
            throw .unknownInterface("\(object.path.rawValue) has no interface \(name)")
        }
        func find(_ call: MethodCall) throws(BusError) -> (BoundInterface, Int) {
            let (bound, name) = try lookup(call)
            let candidates = bound.map { [$0] } ?? object.interfaces
            for c in candidates {
                if let p = c.property(name) { return (c, p) }
            }
            let scope = call.string(0).isEmpty ? "" : " in \(call.string(0))"
            throw .unknownProperty("\(object.path.rawValue) has no property \(name)\(scope)")
        }
        switch member {
        case "Get":
            return expecting("ss", "v", iface) { call throws(BusError) in
                let (bound, index) = try find(call)
                return [.variant(bound.value(index))]
            }
        case "GetAll":
            return expecting("s", "a{sv}", iface) { call throws(BusError) in
                let name = call.string(0)
                if let bound = object.interface(name) { return [bound.allProperties()] }
                if name.isEmpty {
                    return [.vardict(object.interfaces.flatMap { i in
                        i.table.properties.indices.map { (i.table.properties[$0].name, i.value($0)) }
                    })]
                }
                _ = try lookup(call)
                return [.vardict([])]
            }
        case "Set":
            return expecting("ssv", "", iface) { call throws(BusError) in
                let (bound, _) = try find(call)
                throw .propertyReadOnly("property \(call.string(1)) of \(bound.name) is read-only")
            }
        default:
            return .failure(.unknownMethod("\(iface) has no method \(member)"))
        }
    }
}
