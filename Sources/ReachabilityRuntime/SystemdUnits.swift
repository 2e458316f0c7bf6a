import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop

/// systemd's D-Bus API as `reachctl follow-units` uses it: `StartUnit` and `StopUnit`
/// (mode `replace`) on `org.freedesktop.systemd1`, over the library's own connection to
/// the system bus. systemd lets root do it (no capability needed), or whom polkit allows.
package enum SystemdUnits {
    static let name = "org.freedesktop.systemd1"
    static let path = ObjectPath("/org/freedesktop/systemd1")
    static let manager = "org.freedesktop.systemd1.Manager"

    /// Calls `method` (`StartUnit` or `StopUnit`) for `unit`; returns the error in words, or
    /// `nil` once systemd has queued the job (its result is not awaited).
    package static func call(_ method: String, unit: String) async -> String? {
        await Runtime.answer { runtime, done in
            switch runtime.daemonBackend() {
            case .failure(let error):
                done(error.message)
            case .success(let daemon):
                daemon.connection.callAsync(destination: name, path: path, interface: manager, member: method,
                                            [.string(unit), .string("replace")]) { result in
                    switch result {
                    case .success: done(nil)
                    case .failure(let error): done(error.message)
                    }
                }
            }
        }
    }
}
