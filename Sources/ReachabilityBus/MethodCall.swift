import CDBus

/// An incoming method call. Answer it once, with `reply` or `fail`; the
/// dispatcher does that for handlers that return synchronously. A call
/// dropped unanswered is answered with `org.freedesktop.DBus.Error.Failed`.
public final class MethodCall {
    private let message: OpaquePointer
    private weak var connection: BusConnection?
    /// The caller's unique bus name (":1.42").
    public let sender: String
    public let path: ObjectPath
    public let interface: String
    public let member: String
    public let arguments: [DBusValue]
    let expectedOutput: String
    private var answered = false

    init(message: OpaquePointer, connection: BusConnection, path: ObjectPath, interface: String,
         member: String, arguments: [DBusValue], expectedOutput: String) {
        dbus_message_ref(message)
        self.message = message
        self.connection = connection
        self.sender = dbus_message_get_sender(message).map { String(cString: $0) } ?? ""
        self.path = path
        self.interface = interface
        self.member = member
        self.arguments = arguments
        self.expectedOutput = expectedOutput
        // A caller that asked for no reply gets none.
        self.answered = dbus_message_get_no_reply(message) != 0
    }

    deinit {
        if !answered {
            fail(.failed("\(interface).\(member) was not answered"))
        }
        dbus_message_unref(message)
    }

    /// The string argument at `index` (the dispatcher has checked the signature).
    public func string(_ index: Int) -> String { arguments[index].stringValue ?? "" }

    /// Sends the reply. Values whose signature is not the declared one are a
    /// programming error, answered with `Failed` and logged instead of sent.
    public func reply(_ values: [DBusValue]) {
        guard !answered else { return }
        answered = true
        guard values.signature == expectedOutput else {
            Log.error("reply to \(interface).\(member) has signature '\(values.signature)', declared '\(expectedOutput)'")
            send(error: .failed("internal error: reply of \(member) does not match its declaration"))
            return
        }
        guard let connection, let reply = connection.replies.methodReturn(to: message, values) else { return }
        defer { dbus_message_unref(reply) }
        connection.send(reply)
    }

    /// Sends `error` as the reply.
    public func fail(_ error: BusError) {
        guard !answered else { return }
        answered = true
        send(error: error)
    }

    private func send(error: BusError) {
        guard let reply = dbus_message_new_error(message, error.name, error.message) else { return }
        defer { dbus_message_unref(reply) }
        connection?.send(reply)
    }
}
