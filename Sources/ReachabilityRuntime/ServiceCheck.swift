import Logging
import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop

/// What the system bus says about an installed reachabilityd: whether the bus
/// can start it (the activation file), lets a call through (the policy), and
/// whether it answers. `reachctl doctor` prints it.
public struct ReachabilityServiceCheck: Sendable, Hashable {
    /// Why the system bus could not be reached; `nil` when it was.
    public var busError: String?
    /// The daemon owned its name before the check.
    public var wasRunning = false
    /// The bus lists the name among those it can start (an activation file is loaded).
    public var isActivatable = false
    /// The error of the call that should have reached (and, if need be,
    /// started) the daemon; `nil` when it answered.
    public var callError: CallError?
    /// The daemon's `Version` and `Backend`.
    public var version: String?
    public var backend: String?
    /// The user ID and process ID of the name's owner.
    public var ownerUID: UInt32?
    public var ownerPID: UInt32?
    /// The internet target's state, as the daemon answers it.
    public var internet: ReachabilityState?

    /// The daemon answered through the bus.
    public var works: Bool { busError == nil && callError == nil && internet != nil }

    /// A D-Bus error: its name (`org.freedesktop.DBus.Error.AccessDenied`) and message.
    public struct CallError: Sendable, Hashable {
        public var name: String
        public var message: String
    }
}

/// The check `NetworkReachabilityManager.checkService` runs (for `reachctl doctor`).
package enum ServiceCheck {
    /// Asks the bus whether the name has an owner and can be activated, then calls the
    /// daemon (which starts it if it is activatable), and reads its version, backend and
    /// the internet target. Never evaluates in-process. Blocks the library's thread for
    /// the length of the calls (at most `timeoutMilliseconds` each): for tools.
    package static func run(timeoutMilliseconds: Int32) async -> ReachabilityServiceCheck {
        await Runtime.answer { runtime, done in
            done(ServiceProbe.run(timeout: timeoutMilliseconds, logger: runtime.logger))
        }
    }
}

/// The calls of `checkService`, on a private connection of their own.
@LoopActor
private enum ServiceProbe {
    static let bus = ObjectPath("/org/freedesktop/DBus")
    static let root = ObjectPath(rawValue: ServiceNames.rootPath)!

    static func run(timeout: Int32, logger: Logger) -> ReachabilityServiceCheck {
        var check = ReachabilityServiceCheck()
        let connection: BusConnection
        do {
            connection = try BusConnection(.system, logger: logger)
        } catch {
            check.busError = error.message
            return check
        }
        func driver(_ member: String, _ arguments: [DBusValue] = []) -> DBusValue? {
            try? connection.call(destination: "org.freedesktop.DBus", path: bus, interface: "org.freedesktop.DBus",
                                 member: member, arguments, timeoutMilliseconds: 5000).first
        }
        if case .boolean(let owned)? = driver("NameHasOwner", [.string(ServiceNames.busName)]) {
            check.wasRunning = owned
        }
        if case .array(_, let names)? = driver("ListActivatableNames") {
            check.isActivatable = names.contains(.string(ServiceNames.busName))
        }
        // A method call to the name: the bus applies the policy, and starts the
        // daemon first when it is not running.
        do {
            let all = try connection.call(
                destination: ServiceNames.busName, path: root, interface: "org.freedesktop.DBus.Properties",
                member: "GetAll", [.string(ServiceNames.targetInterface)], timeoutMilliseconds: timeout)
            check.internet = ReachabilityState(properties: properties(all.first))
            let manager = try connection.call(
                destination: ServiceNames.busName, path: root, interface: "org.freedesktop.DBus.Properties",
                member: "GetAll", [.string(ServiceNames.managerInterface)], timeoutMilliseconds: timeout)
            let values = properties(manager.first)
            if case .string(let version)? = values[Contract.Manager.version.name] { check.version = version }
            if case .string(let backend)? = values[Contract.Manager.backend.name] { check.backend = backend }
        } catch {
            check.callError = .init(name: error.name, message: error.message)
        }
        if case .uint32(let uid)? = driver("GetConnectionUnixUser", [.string(ServiceNames.busName)]) {
            check.ownerUID = uid
        }
        if case .uint32(let pid)? = driver("GetConnectionUnixProcessID", [.string(ServiceNames.busName)]) {
            check.ownerPID = pid
        }
        return check
    }

    static func properties(_ value: DBusValue?) -> [String: DBusValue] {
        guard case .dictionary(_, _, let entries)? = value else { return [:] }
        return DaemonBackend.dictionary(entries)
    }
}
