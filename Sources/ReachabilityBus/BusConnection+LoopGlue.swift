import CDBus
import CGLib
import Glibc
import ReachabilityLoop

/// libdbus watch and timeout callbacks on GLib sources. The source id is kept
/// as the watch's (timeout's) data pointer. libdbus calls the functions below from
/// the thread that called into it, and GLib the sources' from the loop: each enters
/// the actor through `LoopActor.assumeIsolated`, as the connection's callbacks do.
@LoopActor
enum LoopGlue {
    nonisolated static let addWatch: DBusAddWatchFunction = { watch, data in
        LoopActor.assumeIsolated((watch!, data.map { Unmanaged<BusConnection>.fromOpaque($0) })) {
            connections[$0.0] = $0.1
            enable(watch: $0.0)
        }
        return 1
    }

    nonisolated static let removeWatch: DBusRemoveWatchFunction = { watch, _ in
        LoopActor.assumeIsolated(watch!) {
            connections[$0] = nil
            disable(watch: $0)
        }
    }

    /// The connection of each watch (the data given to `dbus_connection_set_watch_functions`:
    /// not retained, as the connection removes its watches before it goes).
    static var connections: [OpaquePointer: Unmanaged<BusConnection>] = [:]

    nonisolated static let toggleWatch: DBusWatchToggledFunction = { watch, _ in
        LoopActor.assumeIsolated(watch!) { watch in
            disable(watch: watch)
            enable(watch: watch)
        }
    }

    nonisolated static let addTimeout: DBusAddTimeoutFunction = { timeout, _ in
        LoopActor.assumeIsolated(timeout!) { enable(timeout: $0) }
        return 1
    }

    nonisolated static let removeTimeout: DBusRemoveTimeoutFunction = { timeout, _ in
        LoopActor.assumeIsolated(timeout!) { disable(timeout: $0) }
    }

    nonisolated static let toggleTimeout: DBusTimeoutToggledFunction = { timeout, _ in
        LoopActor.assumeIsolated(timeout!) { timeout in
            disable(timeout: timeout)
            enable(timeout: timeout)
        }
    }

    /// The watch's fd is ready. Wraps `dbus_watch_handle`.
    nonisolated static let watchReady: GUnixFDSourceFunc = { _, condition, data in
        var flags: UInt32 = 0
        if condition.rawValue & G_IO_IN.rawValue != 0 { flags |= UInt32(DBUS_WATCH_READABLE.rawValue) }
        if condition.rawValue & G_IO_OUT.rawValue != 0 { flags |= UInt32(DBUS_WATCH_WRITABLE.rawValue) }
        if condition.rawValue & G_IO_HUP.rawValue != 0 { flags |= UInt32(DBUS_WATCH_HANGUP.rawValue) }
        if condition.rawValue & G_IO_ERR.rawValue != 0 { flags |= UInt32(DBUS_WATCH_ERROR.rawValue) }
        LoopActor.assumeIsolated(OpaquePointer(data!)) { watch in
            guard flags & UInt32(DBUS_WATCH_READABLE.rawValue) != 0,
                let connection = connections[watch]?.takeUnretainedValue()
            else {
                _ = dbus_watch_handle(watch, flags)
                return
            }
            let idle = dbus_connection_get_dispatch_status(connection.raw) == DBUS_DISPATCH_COMPLETE
            _ = dbus_watch_handle(watch, flags)
            if idle { readOn(watch, connection) }
        }
        return 1
    }

    /// Goes on reading while what was read holds no whole message yet and more waits in the
    /// socket: a large message. libdbus reads 4 KiB a turn of the loop, so a 25 MiB message
    /// took over 6,000 turns, and every call behind it in the bus's queue waited for them;
    /// here it takes about 25 turns of 1 MiB. Stops at the first whole message (served as
    /// before) and when libdbus stops reading (its bounds on what it holds).
    static func readOn(_ watch: OpaquePointer, _ connection: BusConnection) {
        let most = connection.limits.readsPerMessageTurn
        var reads = 0
        while reads < most {
            // (A watch libdbus removed meanwhile — it disconnected — is no longer in `connections`.)
            guard isWatch(watch, of: connection) else { return }
            var waiting: Int32 = 0
            guard ioctl(dbus_watch_get_unix_fd(watch), UInt(FIONREAD), &waiting) == 0, waiting > 0 else { return }
            // What waits, in libdbus's reads of 4 KiB, with no more system calls of ours between them.
            for _ in 0..<min(most - reads, (Int(waiting) + 4095) / 4096) {
                guard isWatch(watch, of: connection), dbus_watch_get_enabled(watch) != 0,
                    dbus_connection_get_dispatch_status(connection.raw) == DBUS_DISPATCH_COMPLETE
                else { return }
                _ = dbus_watch_handle(watch, UInt32(DBUS_WATCH_READABLE.rawValue))
                reads += 1
            }
        }
    }

    /// Whether `watch` is still one of `connection`'s.
    private static func isWatch(_ watch: OpaquePointer, of connection: BusConnection) -> Bool {
        connections[watch]?.takeUnretainedValue() === connection
    }

    /// The timeout is due. Wraps `dbus_timeout_handle`.
    nonisolated static let timeoutDue: GSourceFunc = { data in
        LoopActor.assumeIsolated(OpaquePointer(data)) { timeout in _ = dbus_timeout_handle(timeout) }
        return 1
    }

    static func enable(watch: OpaquePointer) {
        guard dbus_watch_get_enabled(watch) != 0 else { return }
        let flags = dbus_watch_get_flags(watch)
        var condition = G_IO_HUP.rawValue | G_IO_ERR.rawValue
        if flags & UInt32(DBUS_WATCH_READABLE.rawValue) != 0 { condition |= G_IO_IN.rawValue }
        if flags & UInt32(DBUS_WATCH_WRITABLE.rawValue) != 0 { condition |= G_IO_OUT.rawValue }
        let id = LoopContext.addFD(dbus_watch_get_unix_fd(watch), GIOCondition(condition), watchReady,
                                   UnsafeMutableRawPointer(watch), nil)
        dbus_watch_set_data(watch, UnsafeMutableRawPointer(bitPattern: UInt(id)), nil)
    }

    static func disable(watch: OpaquePointer) {
        let id = UInt(bitPattern: dbus_watch_get_data(watch))
        if id != 0 { LoopContext.remove(guint(id)) }
        dbus_watch_set_data(watch, nil, nil)
    }

    static func enable(timeout: OpaquePointer) {
        guard dbus_timeout_get_enabled(timeout) != 0 else { return }
        let interval = guint(max(0, dbus_timeout_get_interval(timeout)))
        let id = LoopContext.addTimeout(milliseconds: interval, timeoutDue, UnsafeMutableRawPointer(timeout), nil)
        dbus_timeout_set_data(timeout, UnsafeMutableRawPointer(bitPattern: UInt(id)), nil)
    }

    static func disable(timeout: OpaquePointer) {
        let id = UInt(bitPattern: dbus_timeout_get_data(timeout))
        if id != 0 { LoopContext.remove(guint(id)) }
        dbus_timeout_set_data(timeout, nil, nil)
    }
}
