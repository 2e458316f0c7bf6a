import CDBus
import ReachabilityLoop

/// Whole messages as bytes, the way they cross the bus: for the fuzz targets
/// and their regression tests, which feed what a hostile peer could send.
package enum MarshalledMessage {
    /// A method call to `member` with `values` as its body, marshalled.
    /// Wraps `dbus_message_marshal`.
    package static func methodCall(member: String, _ values: [DBusValue]) -> [UInt8]? {
        guard let message = dbus_message_new_method_call(
            "io.github.reachabilityd.Reachability1", "/io/github/reachabilityd/Reachability1",
            "io.github.reachabilityd.Reachability1.Manager", member)
        else { return nil }
        defer { dbus_message_unref(message) }
        dbus_message_set_serial(message, 1)
        guard MessageCodec.appendBody(values, to: message) else { return nil }
        var bytes: UnsafeMutablePointer<CChar>?
        var length: Int32 = 0
        guard dbus_message_marshal(message, &bytes, &length) != 0, let bytes else { return nil }
        defer { dbus_free(bytes) }
        return Array(UnsafeRawBufferPointer(start: bytes, count: Int(length)))
    }

    /// The body of the message in `bytes` — after libdbus validated it as it
    /// validates everything a connection receives — decoded as the service
    /// decodes a call's arguments. `nil` when libdbus rejects the bytes (or the
    /// body holds file descriptors). Wraps `dbus_message_demarshal`.
    package static func decodeBody(_ bytes: [UInt8]) -> (signature: String, values: [DBusValue])? {
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        let message = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { dbus_message_demarshal($0.baseAddress, Int32($0.count), &error) }
        }
        guard let message else { return nil }
        defer { dbus_message_unref(message) }
        let signature = dbus_message_get_signature(message).map { String(cString: $0) } ?? ""
        return MessageCodec.decodeBody(message).map { (signature, $0) }
    }
}
