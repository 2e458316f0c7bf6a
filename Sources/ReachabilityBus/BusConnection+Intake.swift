import CDBus
import ReachabilityLoop

/// What a peer can make the connection hold before its call is even decoded: the file
/// descriptors attached to it and the bytes of its arguments. Both are refused as the
/// call is read, before anything queues it, so they cost only the time to read them.
///
/// - **Descriptors.** No method of the service takes one (the decoder refuses `h`), yet a
///   peer may attach descriptors to any call (the bus passes 16 a message). A call
///   carrying any is answered at once with `InvalidArgs`, and its message — which owns the
///   descriptors — is released at the end of its dispatch, which closes them. Calls read but
///   not yet dispatched are bounded by `maxReceivedDescriptors`: past it libdbus stops
///   reading until they are dispatched.
/// - **Size.** libdbus reads a message whole before anyone sees it (up to the bus's
///   maximum, 32 MiB); the service's largest argument is a host name. A call whose
///   arguments exceed `maxArguments` is answered with `InvalidArgs` without being decoded:
///   the size is found by walking the message up to that bound, not by copying it.
extension BusConnection {
    /// Descriptors libdbus may hold in messages read and not yet dispatched; libdbus stops
    /// reading past it (its default, 4,096, is more than a process's default limit of 1,024).
    nonisolated static let maxReceivedDescriptors = 256
    /// Descriptors one message may carry: the kernel's most for one `sendmsg` (`SCM_MAX_FD`),
    /// so that no message the bus passes can make libdbus take the connection for corrupt.
    nonisolated static let maxMessageDescriptors = 253
    /// The most descriptors a peer can make the process hold at once: what libdbus may hold,
    /// plus the message read when it reached that.
    public nonisolated static let peerDescriptorBound = maxReceivedDescriptors + maxMessageDescriptors
    /// The largest arguments a call may have: far more than any call of the contract
    /// (a host name is at most 253 bytes), far less than the bus's 32 MiB.
    nonisolated static let maxArguments = 64 * 1024

    /// Sets libdbus's bounds on what it reads ahead. Wraps
    /// `dbus_connection_set_max_received_unix_fds` and `dbus_connection_set_max_message_unix_fds`.
    func boundIntake() {
        dbus_connection_set_max_message_unix_fds(raw, Self.maxMessageDescriptors)
        dbus_connection_set_max_received_unix_fds(raw, Self.maxReceivedDescriptors)
    }

    /// Why `message` is refused before it is decoded, or `nil`. Wraps
    /// `dbus_message_contains_unix_fds`.
    func intakeRefusal(_ message: OpaquePointer) -> BusError? {
        if dbus_message_contains_unix_fds(message) != 0 {
            return .invalidArgs("file descriptors are not accepted: no method of this service takes one")
        }
        if MessageCodec.bodyExceeds(message, Self.maxArguments) {
            Memory.trimSoon()
            return .invalidArgs("""
                the arguments are larger than \(Self.maxArguments / 1024) KiB; \
                no method of this service takes more than a host name
                """)
        }
        return nil
    }
}
