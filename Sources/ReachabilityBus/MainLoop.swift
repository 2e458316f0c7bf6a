import CNetworkManager

/// The GLib main loop that drives everything: libdbus (through `BusConnection`),
/// libnm, rtnetlink sockets and timers. One thread — the one that calls `run()` —
/// owns the loop and all mutable state; every callback below runs on it.
public final class MainLoop {
    private let loop: OpaquePointer

    public init() {
        // Own the default context from the start, so callbacks can check they run on it.
        g_main_context_acquire(nil)
        loop = g_main_loop_new(nil, 0)
    }

    deinit { g_main_loop_unref(loop) }

    /// Runs until `quit()`. Wraps `g_main_loop_run`.
    public func run() { g_main_loop_run(loop) }

    /// Wraps `g_main_loop_quit`.
    public func quit() { g_main_loop_quit(loop) }

    /// Runs one iteration; for tests that drive the loop by hand. Wraps `g_main_context_iteration`.
    @discardableResult
    public static func iterate(blocking: Bool) -> Bool {
        g_main_context_iteration(nil, blocking ? 1 : 0) != 0
    }
}

/// A callback box passed to GLib as user data; released by GLib's destroy notify.
final class Callback {
    let body: () -> Bool
    init(_ body: @escaping () -> Bool) { self.body = body }

    var retainedPointer: gpointer { Unmanaged.passRetained(self).toOpaque() }

    static func from(_ pointer: gpointer?) -> Callback {
        Unmanaged<Callback>.fromOpaque(pointer!).takeUnretainedValue()
    }

    static let release: GDestroyNotify = { pointer in
        Unmanaged<Callback>.fromOpaque(pointer!).release()
    }

    static let sourceFunc: GSourceFunc = { pointer in
        from(pointer).body() ? 1 : 0
    }
}

/// A GLib source (idle, timeout, fd or signal) that is removed when this value is dropped.
public final class SourceHandle {
    private var id: guint

    init(id: guint) { self.id = id }

    /// Removes the source now. Wraps `g_source_remove`.
    public func cancel() {
        if id != 0 { g_source_remove(id) }
        id = 0
    }

    /// Forget the source without removing it (it removed itself).
    func finished() { id = 0 }

    public var isActive: Bool { id != 0 }

    deinit { cancel() }
}

public enum Sources {
    /// A handle and a callback that runs `body` until it returns false, then
    /// marks the handle finished (GLib removes the source itself).
    private static func repeating(_ body: @escaping () -> Bool) -> (SourceHandle, Callback) {
        let handle = SourceHandle(id: 0)
        let callback = Callback {
            let again = body()
            if !again { handle.finished() }
            return again
        }
        return (handle, callback)
    }

    /// Calls `body` once from the loop, after the events already pending at `priority`.
    /// Wraps `g_idle_add_full`.
    public static func idle(priority: Int32 = G_PRIORITY_DEFAULT, _ body: @escaping () -> Void) -> SourceHandle {
        let handle = SourceHandle(id: 0)
        let callback = Callback {
            handle.finished()
            body()
            return false
        }
        let id = g_idle_add_full(priority, Callback.sourceFunc, callback.retainedPointer, Callback.release)
        return SourceHandle.replacing(handle, id: id)
    }

    /// Calls `body` every `seconds` until it returns false or the handle is dropped.
    /// Wraps `g_timeout_add_seconds_full`.
    public static func every(seconds: UInt32, _ body: @escaping () -> Bool) -> SourceHandle {
        let (handle, callback) = repeating(body)
        let id = g_timeout_add_seconds_full(G_PRIORITY_DEFAULT, seconds, Callback.sourceFunc,
                                            callback.retainedPointer, Callback.release)
        return SourceHandle.replacing(handle, id: id)
    }

    /// Calls `body` when `fd` is readable (or hung up), until it returns false or the
    /// handle is dropped. Wraps `g_unix_fd_add_full`.
    public static func readable(fd: Int32, _ body: @escaping () -> Bool) -> SourceHandle {
        let (handle, callback) = repeating(body)
        let condition = GIOCondition(rawValue: G_IO_IN.rawValue | G_IO_HUP.rawValue | G_IO_ERR.rawValue)
        let id = g_unix_fd_add_full(G_PRIORITY_DEFAULT, fd, condition, { _, _, pointer in
            Callback.from(pointer).body() ? 1 : 0
        }, callback.retainedPointer, Callback.release)
        return SourceHandle.replacing(handle, id: id)
    }

    /// Calls `body` on the loop when the process receives `signal` (SIGTERM, SIGINT, SIGHUP…),
    /// after unblocking it (a parent may have started us with it blocked).
    /// Wraps `g_unix_signal_add_full`.
    public static func onSignal(_ signal: Int32, _ body: @escaping () -> Void) -> SourceHandle {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, signal)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
        let handle = SourceHandle(id: 0)
        let callback = Callback {
            body()
            return true
        }
        let id = g_unix_signal_add_full(G_PRIORITY_DEFAULT, signal, Callback.sourceFunc,
                                        callback.retainedPointer, Callback.release)
        return SourceHandle.replacing(handle, id: id)
    }
}

extension SourceHandle {
    /// The handle exists before GLib gives the id (the callback needs it); fill it in.
    fileprivate static func replacing(_ handle: SourceHandle, id: guint) -> SourceHandle {
        handle.id = id
        return handle
    }
}

/// The loop's monotonic clock. Wraps `g_get_monotonic_time`.
public enum MonotonicClock {
    public static func microseconds() -> Int64 { Int64(g_get_monotonic_time()) }
}
