import ReachabilityCore
import ReachabilityLoop

/// Finds what handles a method call and answers it: every call gets a reply or
/// a named error. The call's arguments are decoded whole before this runs, and a
/// handler runs only when they match its declared signature, so no handler can
/// read an argument that is not there.
///
/// Order of the search: the interface the call names (one of the object's
/// tables, or a standard interface the path implements); for a call without an
/// interface, the first of the object's tables with that member, then the
/// standard interfaces.
@LoopActor
enum Dispatcher {
    struct Handler {
        let interface: String
        let input: String
        let output: String
        let invoke: (MethodCall) throws(BusError) -> [DBusValue]?
    }

    /// Answers `call` now, or lets its handler answer later.
    static func dispatch(_ call: MethodCall, in tree: ObjectTree) {
        let handler: Handler
        switch route(path: call.path, interface: call.interface, member: call.member, user: call.user, in: tree) {
        case .failure(let error): return call.fail(error)
        case .success(let found): handler = found
        }
        guard call.signature == handler.input else {
            return call.fail(.invalidArgs(
                "\(handler.interface).\(call.member) takes arguments of signature '\(handler.input)', "
                    + "not '\(call.signature)'"))
        }
        call.interface = handler.interface
        call.expectedOutput = handler.output
        do {
            if let values = try handler.invoke(call) { call.reply(values) }
        } catch {
            call.fail(error)
        }
    }

    /// What handles `member` at `path` for a caller of `user`: an object the user may
    /// not see is answered as no object.
    static func route(path: ObjectPath, interface: String, member: String, user: UserID, in tree: ObjectTree)
        -> Result<Handler, BusError>
    {
        let object = tree.object(at: path, for: user)
        let standard = tree.standardInterfaces(at: path, for: user)
        func own(_ bound: BoundInterface, _ method: ErasedInterface.ErasedMethod) -> Handler {
            let owner = bound.owner
            return Handler(interface: bound.name, input: method.input, output: method.output) {
                call throws(BusError) in try method.invoke(owner, call)
            }
        }
        func builtIn(_ standard: StandardInterface, _ method: StandardInterface.Method) -> Handler {
            Handler(interface: standard.name, input: method.input, output: method.output) {
                call throws(BusError) in try method.invoke(tree, call)
            }
        }
        let noObject = BusError.unknownObject("no object at \(path.rawValue)")

        if interface.isEmpty {
            for bound in object?.interfaces ?? [] {
                if let method = bound.table.methods[member] { return .success(own(bound, method)) }
            }
            for candidate in standard {
                if let method = candidate.method(member) { return .success(builtIn(candidate, method)) }
            }
            return .failure(object == nil ? noObject : .unknownMethod("\(path.rawValue) has no method \(member)"))
        }
        if let candidate = standard.first(where: { $0.name == interface }) {
            guard let method = candidate.method(member) else {
                return .failure(.unknownMethod("\(interface) has no method \(member)"))
            }
            return .success(builtIn(candidate, method))
        }
        guard let object else { return .failure(noObject) }
        guard let bound = object.interface(interface) else {
            return .failure(.unknownInterface("\(path.rawValue) has no interface \(interface)"))
        }
        guard let method = bound.table.methods[member] else {
            return .failure(.unknownMethod("\(path.rawValue) has no method \(member) in \(interface)"))
        }
        return .success(own(bound, method))
    }
}
