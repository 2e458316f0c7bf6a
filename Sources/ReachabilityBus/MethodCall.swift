import CDBus
import Logging
import ReachabilityCore
import ReachabilityLoop

/// Where a call's answer goes: the bus, or a recorder in tests.
@LoopActor
protocol CallResponder: AnyObject {
    func send(reply values: [DBusValue], to call: MethodCall)
    func send(error: BusError, to call: MethodCall)
}

/// An incoming method call. Answer it once, with `reply` or `fail`; the
/// dispatcher does that for handlers that return synchronously. A call
/// dropped unanswered is answered with `org.freedesktop.DBus.Error.Failed`.
@LoopActor
public final class MethodCall {
    private let responder: CallResponder
    /// The caller's unique bus name (":1.42").
    public let sender: String
    /// The caller's Unix user, as the bus driver reports it; set before the call is
    /// dispatched (0, root, for calls made in tests without a bus).
    public internal(set) var user: UserID = 0
    public let path: ObjectPath
    /// The interface the call named; once dispatched, the one that handles it.
    public internal(set) var interface: String
    public let member: String
    /// Every argument, decoded before dispatch.
    let arguments: [DBusValue]
    /// The arguments' signature, as the message carries it.
    let signature: String
    var expectedOutput = ""
    private var answered: Bool
    /// Where a reply that does not match its declaration is logged (the connection's logger).
    private let logger: Logger

    init(responder: CallResponder, sender: String, path: ObjectPath, interface: String, member: String,
         arguments: [DBusValue], signature: String? = nil, wantsReply: Bool = true, logger: Logger) {
        self.responder = responder
        self.logger = logger
        self.sender = sender
        self.path = path
        self.interface = interface
        self.member = member
        self.arguments = arguments
        self.signature = signature ?? arguments.signature
        // A caller that asked for no reply gets none.
        self.answered = !wantsReply
    }

    isolated deinit {
        if !answered {
            fail(.failed("\(interface).\(member) was not answered"))
        }
    }

    /// The argument at `index`. The dispatcher has checked the signature against
    /// the handler's declaration; a handler that reads past it, or a type it did
    /// not declare, gets `InvalidArgs` instead of a crash.
    public func argument(_ index: Int) throws(BusError) -> DBusValue {
        guard arguments.indices.contains(index) else {
            throw .invalidArgs("\(interface).\(member) has no argument \(index) (signature '\(signature)')")
        }
        return arguments[index]
    }

    /// The string argument at `index`.
    public func string(_ index: Int) throws(BusError) -> String {
        guard let value = try argument(index).stringValue else {
            throw .invalidArgs("argument \(index) of \(interface).\(member) is not a string")
        }
        return value
    }

    /// The object path argument at `index`.
    public func objectPath(_ index: Int) throws(BusError) -> ObjectPath {
        guard case .objectPath(let path) = try argument(index) else {
            throw .invalidArgs("argument \(index) of \(interface).\(member) is not an object path")
        }
        return path
    }

    /// Sends the reply. Values whose signature is not the declared one are a
    /// programming error, answered with `Failed` and logged instead of sent.
    public func reply(_ values: [DBusValue]) {
        guard !answered else { return }
        answered = true
        guard values.signature == expectedOutput else {
            logger.error("""
                reply to \(interface).\(member) has signature '\(values.signature)', \
                declared '\(expectedOutput)'
                """)
            responder.send(error: .failed("internal error: reply of \(member) does not match its declaration"),
                           to: self)
            return
        }
        responder.send(reply: values, to: self)
    }

    /// Sends `error` as the reply.
    public func fail(_ error: BusError) {
        guard !answered else { return }
        answered = true
        responder.send(error: error, to: self)
    }

    /// Drops the call unanswered: its caller left the bus, or does not read what
    /// it is sent (an answer would only add to what waits for it).
    func abandon() { answered = true }

    /// Counts the call as answered with `error` and returns what the error reply needs, to be
    /// sent later (`nil`: it wants no reply, or was answered). Keeps no message.
    func answerLater(_ error: BusError) -> LaterError? {
        guard !answered, let serial = (responder as? MessageResponder)?.serial else { return nil }
        answered = true
        return LaterError(destination: sender, serial: serial, error: error)
    }

    /// About how many bytes the call holds while it waits (its message and its arguments).
    var cost: Int { arguments.messageSize }
}

/// Answers a call that came in a libdbus message, on the connection it came from.
@LoopActor
final class MessageResponder: CallResponder {
    private let message: OpaquePointer
    fileprivate private(set) weak var connection: BusConnection?

    init(message: OpaquePointer, connection: BusConnection) {
        dbus_message_ref(message)
        self.message = message
        self.connection = connection
    }

    isolated deinit { dbus_message_unref(message) }

    var serial: UInt32 { dbus_message_get_serial(message) }

    func send(reply values: [DBusValue], to call: MethodCall) {
        let size = values.messageSize
        guard let connection, let reply = connection.replies.methodReturn(to: message, values, size: size) else {
            return
        }
        defer { dbus_message_unref(reply) }
        connection.send(reply, to: call.sender, size: size)
    }

    func send(error: BusError, to call: MethodCall) {
        guard let reply = dbus_message_new_error(message, error.name, error.message) else { return }
        defer { dbus_message_unref(reply) }
        connection?.send(reply, to: call.sender, size: 128 + error.name.utf8.count + error.message.utf8.count)
    }
}

// MARK: The caller's credentials

extension MethodCall {
    /// The caller's groups as the kernel gave them to the bus when it connected
    /// (`GetConnectionCredentials`, `UnixGroupIDs`: primary and supplementary, so a
    /// unit's `SupplementaryGroups=` counts), or `nil` when the bus cannot say.
    /// `reply` runs on the loop. A call made without a bus (tests) has none.
    public func callerGroups(_ reply: @escaping @LoopActor ([UInt32]?) -> Void) {
        guard let connection = (responder as? MessageResponder)?.connection else { return reply(nil) }
        connection.callAsync(destination: "org.freedesktop.DBus", path: ObjectPath("/org/freedesktop/DBus"),
                             interface: "org.freedesktop.DBus", member: "GetConnectionCredentials",
                             [.string(sender)], timeoutMilliseconds: 5_000) { result in
            reply(MethodCall.groups(in: result))
        }
    }

    /// `UnixGroupIDs` from a `GetConnectionCredentials` answer.
    static func groups(in result: Result<[DBusValue], BusError>) -> [UInt32]? {
        guard case .success(let values) = result, case .dictionary(_, _, let entries)? = values.first else { return nil }
        for entry in entries where entry.key.stringValue == "UnixGroupIDs" {
            guard case .variant(.array(_, let ids)) = entry.value else { return nil }
            return ids.compactMap { if case .uint32(let id) = $0 { id } else { nil } }
        }
        return nil
    }
}

/// An error reply to a call, made only when it is sent: a few dozen bytes while it waits.
struct LaterError {
    let destination: String
    let serial: UInt32
    let error: BusError

    /// About what the reply weighs in the bus.
    var size: Int { 128 + error.name.utf8.count + error.message.utf8.count }

    /// The reply, as `dbus_message_new_error` would make it. Wraps `dbus_message_new`.
    func message() -> OpaquePointer? {
        guard let reply = dbus_message_new(DBUS_MESSAGE_TYPE_ERROR) else { return nil }
        dbus_message_set_no_reply(reply, 1)
        guard dbus_message_set_error_name(reply, error.name) != 0, dbus_message_set_reply_serial(reply, serial) != 0,
            dbus_message_set_destination(reply, destination) != 0,
            MessageCodec.appendBody([.string(error.message)], to: reply)
        else {
            dbus_message_unref(reply)
            return nil
        }
        return reply
    }
}
