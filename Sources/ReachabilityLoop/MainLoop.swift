import CGLib
import Synchronization

/// The GLib main loop that drives everything: libdbus (through `BusConnection`),
/// libnm, rtnetlink sockets and timers. One thread — the one that made it — runs
/// the process's loop context; `LoopActor` is that thread as a type, and every
/// callback below runs on it.
///
/// The context is the process's own (`LoopContext.context`), never GLib's global
/// default, so a program using the library keeps its GLib main loop to itself.
public final class MainLoop {
    private let loop: OpaquePointer

    /// Makes the calling thread the loop's thread: from here on it is on
    /// `LoopActor` (and only it may run the loop). Libraries that follow the
    /// thread-default context (libnm, GIO's resolver) deliver on it too.
    /// Wraps `g_main_context_push_thread_default` and `g_main_loop_new`.
    public init() {
        g_main_context_push_thread_default(LoopContext.context)
        precondition(g_main_context_is_owner(LoopContext.context) != 0,
                     "reachability: another thread already runs the loop")
        loop = g_main_loop_new(LoopContext.context, 0)
    }

    deinit { g_main_loop_unref(loop) }

    /// Keeps GLib's idle worker threads (GTask's pool, named "pool") waiting for work instead of
    /// ending 15 s after their last job: a thread that ends is a wake-up while nothing changes
    /// (`kernel_flaps.py` caught one in its idle window). For the daemon only — it sets the
    /// process's GLib, which a program using the library keeps as it chose. Wraps
    /// `g_thread_pool_set_max_idle_time`.
    public static func keepIdleWorkers() { g_thread_pool_set_max_idle_time(0) }

    /// Runs until `quit()`, as a task on `LoopActor` started in place (`Task.immediate`):
    /// the Swift runtime then knows this thread's executor, and the isolation checks it
    /// makes in callbacks are a comparison instead of a question to GLib. Wraps `g_main_loop_run`.
    public func run() {
        let loop = UInt(bitPattern: Int(bitPattern: UnsafeMutableRawPointer(self.loop)))
        let ended = Flag()
        LoopActor.assumeIsolated(()) { _ in
            _ = Task.immediate { @LoopActor in
                g_main_loop_run(OpaquePointer(bitPattern: loop))
                ended.set()
            }
        }
        // Started in place, the task has run to its end; enqueued instead, nothing would run it.
        precondition(ended.isSet, "reachability: the loop did not start on its own thread")
    }

    /// Whether something happened, seen from the thread that asks.
    private final class Flag: Sendable {
        private let value = Atomic<Bool>(false)
        func set() { value.store(true, ordering: .relaxed) }
        var isSet: Bool { value.load(ordering: .relaxed) }
    }

    /// Wraps `g_main_loop_quit`.
    public func quit() { g_main_loop_quit(loop) }
}

/// The process's loop context: every source is attached to it, and `LoopActor`'s
/// jobs run on it.
package enum LoopContext {
    /// Made once (Swift's lazy global initialisation is thread-safe) and never changed;
    /// kept as its address, and GLib's context functions used on it are thread-safe.
    /// Wraps `g_main_context_new`.
    package static var context: OpaquePointer { OpaquePointer(bitPattern: address)! }

    private static let address = UInt(bitPattern: Int(bitPattern: UnsafeMutableRawPointer(g_main_context_new())))

    /// Attaches `source` with `callback` and returns its id. Wraps `g_source_attach`.
    package static func attach(
        _ source: UnsafeMutablePointer<GSource>, priority: Int32, _ callback: GSourceFunc?, _ data: gpointer?,
        _ destroy: GDestroyNotify?
    ) -> guint {
        g_source_set_priority(source, priority)
        g_source_set_callback(source, callback, data, destroy)
        let id = g_source_attach(source, context)
        g_source_unref(source)
        return id
    }

    /// Removes the source `id`. Wraps `g_source_destroy`.
    package static func remove(_ id: guint) {
        if let source = g_main_context_find_source_by_id(context, id) { g_source_destroy(source) }
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
/// Its C functions are written here, in a nonisolated place: the compiler lets them run the
/// box's `@LoopActor` body only through `LoopActor.assumeIsolated`.
final class Callback {
    let body: @LoopActor () -> Bool
    init(_ body: @escaping @LoopActor () -> Bool) { self.body = body }

    var retainedPointer: gpointer { Unmanaged.passRetained(self).toOpaque() }

    static func from(_ pointer: gpointer?) -> Callback {
        Unmanaged<Callback>.fromOpaque(pointer!).takeUnretainedValue()
    }

    /// Only releases the box (thread-safe, as every release is), so it does not enter the actor.
    static let release: GDestroyNotify = { pointer in
        Unmanaged<Callback>.fromOpaque(pointer!).release()
    }

    /// An idle, timeout or signal source fired.
    static let sourceFunc: GSourceFunc = { pointer in
        LoopActor.assumeIsolated(from(pointer)) { $0.body() } ? 1 : 0
    }

    /// An fd source fired.
    static let fdSourceFunc: GUnixFDSourceFunc = { _, _, pointer in
        LoopActor.assumeIsolated(from(pointer)) { $0.body() } ? 1 : 0
    }
}

/// A GLib source (idle, timeout, fd or signal) that is removed when this value is dropped.
@LoopActor
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

    isolated deinit { cancel() }
}

@LoopActor
public enum Sources {
    /// A handle and a callback that runs `body` until it returns false, then
    /// marks the handle finished (GLib removes the source itself).
    private static func repeating(_ body: @escaping @LoopActor () -> Bool) -> (SourceHandle, Callback) {
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
    public static func idle(
        priority: Int32 = G_PRIORITY_DEFAULT, _ body: @escaping @LoopActor () -> Void
    ) -> SourceHandle {
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
    public static func every(seconds: UInt32, _ body: @escaping @LoopActor () -> Bool) -> SourceHandle {
        let (handle, callback) = repeating(body)
        let id = LoopContext.attach(g_timeout_source_new_seconds(seconds), priority: G_PRIORITY_DEFAULT,
                                    Callback.sourceFunc, callback.retainedPointer, Callback.release)
        return SourceHandle.replacing(handle, id: id)
    }

    /// Calls `body` once, `milliseconds` from now, unless the handle is dropped first.
    /// Wraps `g_timeout_source_new`.
    public static func after(milliseconds: UInt32, _ body: @escaping @LoopActor () -> Void) -> SourceHandle {
        let (handle, callback) = repeating {
            body()
            return false
        }
        let id = LoopContext.addTimeout(milliseconds: milliseconds, Callback.sourceFunc, callback.retainedPointer,
                                        Callback.release)
        return SourceHandle.replacing(handle, id: id)
    }

    /// Calls `body` when `fd` is readable (or hung up), until it returns false or the
    /// handle is dropped.
    public static func readable(fd: Int32, _ body: @escaping @LoopActor () -> Bool) -> SourceHandle {
        watch(fd: fd, for: G_IO_IN, body)
    }

    /// Calls `body` when `fd` can be written to (or hung up), until it returns false or the
    /// handle is dropped.
    public static func writable(fd: Int32, _ body: @escaping @LoopActor () -> Bool) -> SourceHandle {
        watch(fd: fd, for: G_IO_OUT, body)
    }

    private static func watch(fd: Int32, for wanted: GIOCondition, _ body: @escaping @LoopActor () -> Bool)
        -> SourceHandle
    {
        let (handle, callback) = repeating(body)
        let condition = GIOCondition(rawValue: wanted.rawValue | G_IO_HUP.rawValue | G_IO_ERR.rawValue)
        let id = LoopContext.addFD(fd, condition, Callback.fdSourceFunc, callback.retainedPointer, Callback.release)
        return SourceHandle.replacing(handle, id: id)
    }

    /// Calls `body` on the loop when the process receives `signal` (SIGTERM, SIGINT, SIGHUP…),
    /// after unblocking it (a parent may have started us with it blocked).
    /// Wraps `g_unix_signal_source_new`.
    public static func onSignal(_ signal: Int32, _ body: @escaping @LoopActor () -> Void) -> SourceHandle {
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

/// A thread running the loop, for a library inside someone else's program: all of
/// the library's GLib, libnm and libdbus work happens on it (it is `LoopActor`'s
/// thread). It runs for the life of the process; when nothing changes it sleeps
/// in `poll` (no wake-ups).
public enum LoopThread {
    /// Starts the thread once per process; later calls do nothing. Jobs sent to
    /// `LoopActor` before its loop runs wait for it. Wraps `pthread_create`.
    public static func start() { _ = started }

    private static let started: Bool = {
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { _ in
            MainLoop().run()
            return nil
        }, nil)
        precondition(result == 0, "cannot start the reachability loop thread (error \(result))")
        pthread_detach(thread)
        return true
    }()
}
