import CDBus

extension BusConnection {
    /// Calls a method and waits for its reply (the loop does not run meanwhile).
    /// For command-line tools, benchmarks and start-up; never from a daemon's handler.
    /// Wraps `dbus_connection_send_with_reply_and_block`.
    public func call(
        destination: String, path: ObjectPath, interface: String, member: String, _ arguments: [DBusValue] = [],
        timeoutMilliseconds: Int32 = 25_000
    ) throws(BusError) -> [DBusValue] {
        guard let message = dbus_message_new_method_call(destination, path.rawValue, interface, member) else {
            throw .failed("out of memory")
        }
        defer { dbus_message_unref(message) }
        guard MessageCodec.appendBody(arguments, to: message) else { throw .failed("out of memory") }
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        guard let reply = dbus_connection_send_with_reply_and_block(raw, message, timeoutMilliseconds, &error) else {
            throw BusError(name: Self.errorName(error) ?? BusError.prefix + "Failed",
                           message: Self.errorMessage(error) ?? "no reply")
        }
        defer { dbus_message_unref(reply) }
        guard let values = MessageCodec.decodeBody(reply) else { throw .failed("reply holds file descriptors") }
        return values
    }
}

extension BusConnection {
    /// Sends `count` calls built by `build`, keeping up to `window` in flight, and
    /// waits for every reply; returns the number of error replies. For throughput
    /// benchmarks. Wraps `dbus_connection_send`, `dbus_connection_read_write` and
    /// `dbus_connection_pop_message`.
    public func pipeline(
        count: Int, window: Int,
        _ build: () -> (destination: String, path: ObjectPath, interface: String, member: String, [DBusValue])
    ) -> Int {
        var outstanding = Set<UInt32>()
        var sent = 0
        var errors = 0
        while sent < count || !outstanding.isEmpty {
            while sent < count && outstanding.count < window {
                let (destination, path, interface, member, arguments) = build()
                guard let message = dbus_message_new_method_call(destination, path.rawValue, interface, member)
                else { return errors + count - sent }
                MessageCodec.appendBody(arguments, to: message)
                var serial: UInt32 = 0
                dbus_connection_send(raw, message, &serial)
                dbus_message_unref(message)
                outstanding.insert(serial)
                sent += 1
            }
            _ = dbus_connection_read_write(raw, -1)
            while let message = dbus_connection_pop_message(raw) {
                let type = dbus_message_get_type(message)
                if type == DBUS_MESSAGE_TYPE_METHOD_RETURN || type == DBUS_MESSAGE_TYPE_ERROR {
                    if outstanding.remove(dbus_message_get_reply_serial(message)) != nil,
                        type == DBUS_MESSAGE_TYPE_ERROR
                    {
                        errors += 1
                    }
                }
                dbus_message_unref(message)
            }
        }
        return errors
    }
}
