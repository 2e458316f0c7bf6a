import CGLib
import CNetlink
// GIO's D-Bus names come through libnm's module in this target: in a whole-module (release) build the
// headers CGLib and CNetworkManager share belong to the latter, and CGLib alone does not show them.
import CNetworkManager
import Glibc
import Logging
import ReachabilityCore
import ReachabilityLoop

/// Says when the machine resumed from sleep, so that everything is read again before the
/// next answer (links, addresses, routes, neighbours, names: what was true before the sleep
/// may not be, and a kernel event for each change is not promised across it).
///
/// - logind's `PrepareForSleep(b start)` on the system bus (`start` false: resumed), through
///   GIO's D-Bus connection, acted on only when it comes from logind's current owner. logind
///   may be absent or come later: its name is followed (`g_bus_watch_name_on_connection`,
///   never starting it), as the NetworkManager backend follows NetworkManager.
/// - Without logind: a jump of the wall clock against the monotonic one, which the kernel
///   also makes on resume — a `CLOCK_REALTIME` timerfd with `TFD_TIMER_CANCEL_ON_SET` is
///   readable (its read fails with `ECANCELED`) when the clock is set: an fd event, no polling.
///   While logind is there it is not used (its signal says the same, and more surely).
@LoopActor
final class SleepWatch {
    nonisolated static let busName = "org.freedesktop.login1"
    nonisolated static let managerPath = "/org/freedesktop/login1"
    nonisolated static let managerInterface = "org.freedesktop.login1.Manager"

    private var connection: OpaquePointer?
    private var subscription: guint = 0
    private var nameWatch: guint = 0
    /// logind's unique name while it is on the bus.
    private(set) var owner: String?
    /// Between logind's `PrepareForSleep(true)` and `(false)`: what changes meanwhile (the
    /// network going down for the sleep, or coming back before logind says so) is part of the
    /// sleep, which the resume tells once.
    private(set) var isAsleep = false
    private let cancellable: UnsafeMutablePointer<GCancellable>
    private let handle: Handle
    private var clock: Int32 = -1
    private var clockSource: SourceHandle?
    /// What the clocks said at the last set (`ClockJump`: a sleep, or only a set).
    private var jump = ClockJump(boottime: SleepWatch.now(CLOCK_BOOTTIME), monotonic: SleepWatch.now(CLOCK_MONOTONIC))
    private let onResume: (String) -> Void
    private let logger: Logger

    private final class Handle {
        weak var owner: SleepWatch?
    }

    /// Follows logind on the system bus (asynchronously) and the wall clock; `onResume(why)`
    /// after each resume ("logind" or "the wall clock jumped").
    init(logger: Logger, onResume: @escaping (String) -> Void) {
        self.logger = logger
        self.onResume = onResume
        cancellable = g_cancellable_new()
        handle = Handle()
        handle.owner = self
        g_bus_get(G_BUS_TYPE_SYSTEM, cancellable, Self.busMade, Unmanaged.passRetained(handle).toOpaque())
        watchClock()
    }

    isolated deinit {
        g_cancellable_cancel(cancellable)
        g_object_unref(cancellable)
        if nameWatch != 0 { g_bus_unwatch_name(nameWatch) }
        if let connection {
            if subscription != 0 { g_dbus_connection_signal_unsubscribe(connection, subscription) }
            g_object_unref(UnsafeMutableRawPointer(connection))
        }
        clockSource?.cancel()
        if clock >= 0 { close(clock) }
    }

    private var retainedHandle: gpointer { Unmanaged.passRetained(handle).toOpaque() }
    private static let releaseHandle: @convention(c) (gpointer?) -> Void = { data in
        Unmanaged<Handle>.fromOpaque(data!).release()
    }

    private nonisolated static func enter<Argument>(
        _ data: gpointer?, _ argument: Argument, _ body: @LoopActor (SleepWatch, Argument) -> Void
    ) {
        let handle = Unmanaged<Handle>.fromOpaque(data!).takeUnretainedValue()
        LoopActor.assumeIsolated((handle, argument)) { handle, argument in
            if let owner = handle.owner { body(owner, argument) }
        }
    }

    /// `g_bus_get` ended (its handle was retained for it). Wraps `g_bus_get_finish`.
    private nonisolated static let busMade: GAsyncReadyCallback = { _, result, data in
        let handle = Unmanaged<Handle>.fromOpaque(data!).takeRetainedValue()
        var error: UnsafeMutablePointer<GError>?
        guard let connection = g_bus_get_finish(result, &error) else {
            if let error { _ = GLibError.take(error) }  // no system bus: the clock alone
            return
        }
        LoopActor.assumeIsolated((handle, connection)) { handle, connection in
            guard let owner = handle.owner else { return g_object_unref(UnsafeMutableRawPointer(connection)) }
            owner.attach(connection)
        }
    }

    /// `PrepareForSleep(b start)`, from whoever sent it: acted on only from logind's owner.
    private nonisolated static let prepareForSleep: GDBusSignalCallback = { _, sender, _, _, _, parameters, data in
        guard let sender, let parameters else { return }
        let start = g_variant_get_child_value(parameters, 0)
        defer { g_variant_unref(start) }
        let starting = g_variant_get_boolean(start) != 0
        enter(data, (String(cString: sender), starting)) { owner, signal in owner.prepareForSleep(signal.0, signal.1) }
    }

    private nonisolated static let appeared: GBusNameAppearedCallback = { _, _, owner, data in
        let unique = owner.map { String(cString: $0) }
        enter(data, unique) { watch, unique in watch.owner = unique }
    }

    private nonisolated static let vanished: GBusNameVanishedCallback = { _, _, data in
        enter(data, ()) { watch, _ in watch.owner = nil }
    }

    private func attach(_ connection: OpaquePointer) {
        self.connection = connection
        subscription = g_dbus_connection_signal_subscribe(
            connection, Self.busName, Self.managerInterface, "PrepareForSleep", Self.managerPath, nil,
            G_DBUS_SIGNAL_FLAGS_NONE, Self.prepareForSleep, retainedHandle, Self.releaseHandle)
        nameWatch = g_bus_watch_name_on_connection(
            connection, Self.busName, G_BUS_NAME_WATCHER_FLAGS_NONE, Self.appeared, Self.vanished,
            retainedHandle, Self.releaseHandle)
    }

    private func prepareForSleep(_ sender: String, _ starting: Bool) {
        guard sender == owner else { return }
        isAsleep = starting
        if starting {
            logger.info("the system is going to sleep (logind)")
        } else {
            onResume("logind")
        }
    }

    // MARK: The wall clock

    /// A `CLOCK_REALTIME` timerfd far in the future that ends when the clock is set. Wraps
    /// `timerfd_create(2)`.
    private func watchClock() {
        guard case .success(let fd) = Syscall.call({
            timerfd_create(CLOCK_REALTIME, Int32(TFD_NONBLOCK) | Int32(TFD_CLOEXEC))
        }) else { return }
        clock = fd
        armClock()
        clockSource = Sources.readable(fd: fd) { [unowned self] in
            self.clockEvent()
            return true
        }
    }

    /// Arms the timer ten years ahead, cancelled when the clock is set. Wraps `timerfd_settime(2)`.
    private func armClock() {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var value = itimerspec()
        value.it_value.tv_sec = now.tv_sec + 10 * 365 * 86_400
        let flags = Int32(TFD_TIMER_ABSTIME) | Int32(TFD_TIMER_CANCEL_ON_SET)
        _ = Syscall.call { timerfd_settime(clock, flags, &value, nil) }
    }

    /// The timer's fd is readable: the clock was set (`ECANCELED`), or ten years passed.
    private func clockEvent() {
        var expirations: UInt64 = 0
        let read = Syscall.call { Glibc.read(clock, &expirations, MemoryLayout<UInt64>.size) }
        armClock()
        guard case .failure(let error) = read, error == .canceled else { return }
        // logind's signal speaks for a resume; a clock set with no time asleep is only a clock set.
        guard jump.wasResume(boottime: Self.now(CLOCK_BOOTTIME), monotonic: Self.now(CLOCK_MONOTONIC),
                             logindPresent: owner != nil)
        else { return logger.info("the wall clock was set") }
        onResume("the wall clock jumped")
    }

    /// The clock `id` in nanoseconds. Wraps `clock_gettime(2)`.
    private nonisolated static func now(_ id: clockid_t) -> Int64 {
        var value = timespec()
        clock_gettime(id, &value)
        return Int64(value.tv_sec) * 1_000_000_000 + Int64(value.tv_nsec)
    }
}
