#if canImport(Glibc)
import Glibc
#endif

/// The service manager's notification socket (systemd's `sd_notify` protocol, `NOTIFY_SOCKET`)
/// and its watchdog (`WATCHDOG_USEC`, `WATCHDOG_PID`): what a unit with `WatchdogSec=` expects
/// of its main process. Read once from the environment; nothing is sent where it is not set.
@LoopActor
public final class ServiceManager {
    private let socketPath: String?
    private var fd: Int32 = -1
    /// How often the manager wants to hear `WATCHDOG=1`, in microseconds; `nil`: no watchdog
    /// (not under systemd, `WatchdogSec=` unset, or the watchdog is another process's).
    public nonisolated let watchdogMicroseconds: UInt64?
    private var feeding: SourceHandle?

    public init(environment: (String) -> String? = { getenv($0).map { String(cString: $0) } }) {
        socketPath = environment("NOTIFY_SOCKET").flatMap { $0.isEmpty ? nil : $0 }
        let pid = environment("WATCHDOG_PID").flatMap { Int32($0) }
        if let usec = environment("WATCHDOG_USEC").flatMap({ UInt64($0) }), usec > 0,
           pid == nil || pid == getpid(), socketPath != nil {
            watchdogMicroseconds = usec
        } else {
            watchdogMicroseconds = nil
        }
    }

    isolated deinit {
        if fd >= 0 { close(fd) }
    }

    /// Sends `state` ("WATCHDOG=1", "STOPPING=1", …) when there is a manager to tell; a
    /// manager that cannot take it now (a full socket) misses it. Returns whether it was sent.
    @discardableResult
    public func notify(_ state: String) -> Bool {
        guard let socketPath else { return false }
        if fd < 0 {
            fd = UnixDatagram.openSocket()
            guard fd >= 0 else { return false }
        }
        return UnixDatagram.send(Array(state.utf8), to: socketPath, over: fd) == 0
    }

    /// The period the watchdog is fed at: half the manager's timeout (as `sd_watchdog_enabled(3)`
    /// advises), in whole seconds (GLib's second timers wake with the rest of the system),
    /// at least 1.
    public nonisolated static func feedingPeriod(watchdogMicroseconds: UInt64) -> UInt32 {
        UInt32(clamping: max(1, watchdogMicroseconds / 2 / 1_000_000))
    }

    /// Feeds the watchdog from this loop, once now and then every `feedingPeriod`, for as
    /// long as the loop turns: a loop that is stuck stops feeding it, and the manager ends
    /// the process (the unit's `WatchdogSignal=`) and restarts it. The one timer the daemon
    /// keeps while nothing changes. Returns the period in seconds, or `nil` without a watchdog.
    @discardableResult
    public func feedWatchdog() -> UInt32? {
        guard let usec = watchdogMicroseconds else { return nil }
        let period = Self.feedingPeriod(watchdogMicroseconds: usec)
        notify("WATCHDOG=1")
        feeding = Sources.every(seconds: period) { [unowned self] in
            self.notify("WATCHDOG=1")
            return true
        }
        return period
    }
}
