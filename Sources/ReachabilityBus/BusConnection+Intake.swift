import CDBus
import ReachabilityCore
import ReachabilityFairness
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
///   reading until they are dispatched (`Limits.receivedDescriptors`).
/// - **Size.** libdbus reads a message whole before anyone sees it (up to the bus's
///   maximum: 32 MiB on dbus-daemon, 128 MiB on dbus-broker), and copies it once; the
///   service's largest argument is a host name. libdbus's own bound on a message's size
///   (`dbus_connection_set_max_message_size`) would refuse it sooner, but by disconnecting
///   the service from the bus: any user could then restart it at will. The unit's memory
///   limits leave room for twice the largest message instead (data/reachabilityd.service). A call whose
///   arguments exceed `Limits.argumentBytes` is answered with `InvalidArgs` without being decoded:
///   the size is found by walking the message up to that bound, not by copying it.
extension BusConnection {
    /// The most descriptors a peer can make the process hold at once with the standard limits:
    /// what libdbus may hold, plus the message read when it reached that.
    public nonisolated static let peerDescriptorBound = Limits.standard.peerDescriptorBound

    /// Sets libdbus's bounds on what it reads ahead. Wraps
    /// `dbus_connection_set_max_received_unix_fds` and `dbus_connection_set_max_message_unix_fds`.
    func boundIntake() {
        dbus_connection_set_max_message_unix_fds(raw, limits.messageDescriptors)
        dbus_connection_set_max_received_unix_fds(raw, limits.receivedDescriptors)
    }

    /// Why `message` is refused before it is decoded, or `nil`. Wraps
    /// `dbus_message_contains_unix_fds`.
    func intakeRefusal(_ message: OpaquePointer) -> BusError? {
        if dbus_message_contains_unix_fds(message) != 0 {
            return .invalidArgs("file descriptors are not accepted: no method of this service takes one")
        }
        if MessageCodec.bodyExceeds(message, limits.argumentBytes) {
            Memory.trimSoon()
            return .invalidArgs("""
                the arguments are larger than \(limits.argumentBytes / 1024) KiB; \
                no method of this service takes more than a host name
                """)
        }
        return nil
    }
}
