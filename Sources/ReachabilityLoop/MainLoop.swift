import CGLib
import Synchronization

/// The GLib main loop that drives everything: libdbus (through `BusConnection`),
/// libnm, rtnetlink sockets and timers. One thread — the one that calls `run()` —
/// owns the loop and all mutable state; every callback below runs on it.
///
/// The loop runs the calling thread's default context: GLib's global default
/// context in the daemon, a private one on a `LoopThread` (so that a program
/// using the library keeps its own GLib main loop to itself).
public final class MainLoop {
    private let loop: OpaquePointer

    public init() {
        // Own the context from the start, so callbacks can check they run on it.
        g_main_context_acquire(LoopContext.current)
        loop = g_main_loop_new(LoopContext.current, 0)
    }

    deinit { g_main_loop_unref(loop) }

    /// Runs until `quit()`. Wraps `g_main_loop_run`.
    public func run() { g_main_loop_run(loop) }

    /// Wraps `g_main_loop_quit`.
    public func quit() { g_main_loop_quit(loop) }

    /// Runs one iteration; for tests that drive the loop by hand. Wraps `g_main_context_iteration`.
    @discardableResult
    public static func iterate(blocking: Bool) -> Bool {
        g_main_context_iteration(LoopContext.current, blocking ? 1 : 0) != 0
    }
}

/// Sources are attached to, and removed from, the calling thread's default
/// context (`nil`: GLib's global default context).
package enum LoopContext {
    /// Wraps `g_main_context_get_thread_default`.
    package static var current: OpaquePointer? { g_main_context_get_thread_default() }

    /// Attaches `source` with `callback` and returns its id. Wraps `g_source_attach`.
    package static func attach(
        _ source: UnsafeMutablePointer<GSource>, priority: Int32, _ callback: GSourceFunc?, _ data: gpointer?,
        _ destroy: GDestroyNotify?
    ) -> guint {
        g_source_set_priority(source, priority)
        g_source_set_callback(source, callback, data, destroy)
        let id = g_source_attach(source, current)
        g_source_unref(source)
        return id
    }

    /// Removes the source `id` of this thread's context. Wraps `g_source_destroy`.
    package static func remove(_ id: guint) {
        if let source = g_main_context_find_source_by_id(current, id) { g_source_destroy(source) }
    }

    /// An fd source. Wraps `g_unix_fd_source_new`.
    package static func addFD(
        _ fd: Int32, _ condition: GIOCondition, _ callback: GUnixFDSourceFunc, _ data: gpointer?,
        _ destroy: GDestroyNotify?
    ) -> guint {
        attach(g_unix_fd_source_new(fd, condition), priority: G_PRIORITY_DEFAULT,
               unsafeBitCast(callback, to: GSourceFunc.self), data, destroy)
    }

    /// A timeout in milliseconds. Wraps `g_timeout_source_new`.
    package static func addTimeout(milliseconds: guint, _ callback: GSourceFunc, _ data: gpointer?,
                           _ destroy: GDestroyNotify?) -> guint {
        attach(g_timeout_source_new(milliseconds), priority: G_PRIORITY_DEFAULT, callback, data, destroy)
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

    /// Removes the source now.
    public func cancel() {
        if id != 0 { LoopContext.remove(id) }
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
        // Weak: the handle's owner decides how long the source lives; dropping the handle
        // removes it (a strong capture here would keep both alive, and the source running).
        let callback = Callback { [weak handle] in
            let again = body()
            if !again { handle?.finished() }
            return again
        }
        return (handle, callback)
    }

    /// Calls `body` once from the loop, after the events already pending at `priority`.
    /// Wraps `g_idle_source_new`.
    public static func idle(priority: Int32 = G_PRIORITY_DEFAULT, _ body: @escaping () -> Void) -> SourceHandle {
        let handle = SourceHandle(id: 0)
        let callback = Callback { [weak handle] in
            handle?.finished()
            body()
            return false
        }
        let id = LoopContext.attach(g_idle_source_new(), priority: priority, Callback.sourceFunc,
                                    callback.retainedPointer, Callback.release)
        return SourceHandle.replacing(handle, id: id)
    }

    /// Calls `body` every `seconds` until it returns false or the handle is dropped.
    /// Wraps `g_timeout_source_new_seconds`.
    public static func every(seconds: UInt32, _ body: @escaping () -> Bool) -> SourceHandle {
        let (handle, callback) = repeating(body)
        let id = LoopContext.attach(g_timeout_source_new_seconds(seconds), priority: G_PRIORITY_DEFAULT,
                                    Callback.sourceFunc, callback.retainedPointer, Callback.release)
        return SourceHandle.replacing(handle, id: id)
    }

    /// Calls `body` when `fd` is readable (or hung up), until it returns false or the
    /// handle is dropped.
    public static func readable(fd: Int32, _ body: @escaping () -> Bool) -> SourceHandle {
        let (handle, callback) = repeating(body)
        let condition = GIOCondition(rawValue: G_IO_IN.rawValue | G_IO_HUP.rawValue | G_IO_ERR.rawValue)
        let id = LoopContext.addFD(fd, condition, { _, _, pointer in
            Callback.from(pointer).body() ? 1 : 0
        }, callback.retainedPointer, Callback.release)
        return SourceHandle.replacing(handle, id: id)
    }

    /// Calls `body` on the loop when the process receives `signal` (SIGTERM, SIGINT, SIGHUP…),
    /// after unblocking it (a parent may have started us with it blocked).
    /// Wraps `g_unix_signal_source_new`.
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
        let id = LoopContext.attach(g_unix_signal_source_new(signal), priority: G_PRIORITY_DEFAULT,
                                    Callback.sourceFunc, callback.retainedPointer, Callback.release)
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

/// Wall-clock time (CLOCK_REALTIME), for timestamps shown to people. Wraps `g_get_real_time`.
public enum RealtimeClock {
    public static func microseconds() -> UInt64 { UInt64(max(0, g_get_real_time())) }
}

/// A thread running a `MainLoop` on a private GLib context, for a library inside
/// someone else's program: all of the library's GLib, libnm and libdbus work
/// happens on it. It runs for the life of the process; when nothing changes it
/// sleeps in `poll` (no wake-ups).
public final class LoopThread: Sendable {
    /// Immutable, and GLib's context functions used here are thread-safe.
    nonisolated(unsafe) private let context: OpaquePointer

    /// Starts the thread. Work sent with `perform` before its loop runs waits for it.
    /// Wraps `g_main_context_new`, `pthread_create` and `g_main_context_push_thread_default`.
    public init() {
        context = g_main_context_new()
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { pointer in
            let context = OpaquePointer(pointer!)
            g_main_context_push_thread_default(context)
            MainLoop().run()
            return nil
        }, UnsafeMutableRawPointer(context))
        precondition(result == 0, "cannot start the reachability loop thread (error \(result))")
        pthread_detach(thread)
    }

    /// Whether the caller is this loop's thread. Wraps `g_main_context_is_owner`.
    public var isCurrent: Bool { g_main_context_is_owner(context) != 0 }

    /// Runs `body` on the loop's thread: at once if the caller is that thread,
    /// else as soon as the loop gets to it. Wraps `g_main_context_invoke_full`.
    public func perform(_ body: @escaping @Sendable () -> Void) {
        let callback = Callback {
            body()
            return false
        }
        let pointer = callback.retainedPointer
        // GLib hands the callback over under its own futex lock, which ThreadSanitizer
        // cannot see; this release (and the acquire on the loop) shows it the hand-over.
        Self.handover.add(1, ordering: .releasing)
        g_main_context_invoke_full(context, G_PRIORITY_DEFAULT, { pointer in
            _ = LoopThread.handover.load(ordering: .acquiring)
            return Callback.sourceFunc(pointer)
        }, pointer, Callback.release)
    }

    /// Runs `body` on the loop's thread in a later iteration, never inside the
    /// caller — also when the caller is the loop's thread. For work that must not
    /// run in the middle of whatever the loop is doing now: a `deinit` that runs on
    /// the loop because the last reference went while an update was delivered
    /// must not tear the target down inside that delivery.
    /// Wraps `g_idle_source_new` and `g_source_attach`.
    public func later(_ body: @escaping @Sendable () -> Void) {
        let callback = Callback {
            _ = LoopThread.handover.load(ordering: .acquiring)
            body()
            return false
        }
        let source = g_idle_source_new()!
        g_source_set_priority(source, G_PRIORITY_DEFAULT)
        g_source_set_callback(source, Callback.sourceFunc, callback.retainedPointer, Callback.release)
        Self.handover.add(1, ordering: .releasing)
        g_source_attach(source, context)
        g_source_unref(source)
    }

    private static let handover = Atomic<Int>(0)
}
