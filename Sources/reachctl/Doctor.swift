import ArgumentParser
import Glibc
import ReachabilitydClient

/// `reachctl doctor`: whether the installed service works, and if not, why.
struct Doctor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check the installed service: its files, the bus's policy and activation, and an answer.",
        discussion: """
            Calls reachabilityd on the system bus (the bus starts it if it is not running) and \
            says what worked. Exit status 0 when it answered, 2 when it did not.
            """)

    static let name = "io.github.reachabilityd.Reachability1"

    func run() async throws {
        let address = getenv("DBUS_SYSTEM_BUS_ADDRESS").map { String(cString: $0) }
            ?? "unix:path=/run/dbus/system_bus_socket"
        Output.line("reachabilityd on the system bus (\(address))")
        let check = await NetworkReachabilityManager.checkService()
        let prefix = Self.installationPrefix()
        let policy = Self.find("\(Self.name).conf", in: [
            "\(prefix)/share/dbus-1/system.d", "/usr/share/dbus-1/system.d", "/etc/dbus-1/system.d"])
        let activation = Self.find("\(Self.name).service", in: [
            "\(prefix)/share/dbus-1/system-services", "/usr/share/dbus-1/system-services",
            "/usr/local/share/dbus-1/system-services", "/lib/dbus-1/system-services"])
        row("policy file", policy ?? "not found (dbus-1/system.d of \(prefix), /usr/share or /etc)")
        row("activation file", activation ?? "not found (dbus-1/system-services of \(prefix) or /usr/share)")

        if let busError = check.busError {
            row("system bus", "no: \(busError)")
            try fail("there is no system bus to serve on")
        }
        row("system bus", "connected")
        row("activatable", check.isActivatable
            ? "yes: the bus can start \(Self.name)"
            : "no: the bus has no activation file for \(Self.name) (not installed, or the bus not reloaded)")
        if let error = check.callError {
            row("answers", "no: \(error.name): \(error.message)")
            try fail(Self.sentence(for: error, activatable: check.isActivatable))
        }
        var who = ""
        if let uid = check.ownerUID { who += ", user \(Self.userName(uid))" }
        if let pid = check.ownerPID { who += ", pid \(pid)" }
        row("answers", "yes: version \(check.version ?? "?"), backend \(check.backend ?? "?")\(who)"
            + (check.wasRunning ? "" : " (started by this check)"))
        if let internet = check.internet {
            row("internet", "\(Output.words(internet)) (status \(internet.status.rawValue))")
        }
        Output.line("reachabilityd works.")
    }

    private func row(_ title: String, _ text: String) {
        Output.line("  " + title + String(repeating: " ", count: max(1, 17 - title.count)) + text)
    }

    private func fail(_ sentence: String) throws -> Never {
        Output.line("reachabilityd does not work: \(sentence).")
        throw ExitCode(ExitStatus.failure)
    }

    /// What a failed call means, in words.
    static func sentence(for error: ReachabilityServiceCheck.CallError, activatable: Bool) -> String {
        switch error.name {
        case "org.freedesktop.DBus.Error.AccessDenied":
            "the bus refused the call: its policy (\(name).conf in /usr/share/dbus-1/system.d) is missing or not "
                + "loaded yet (reload the bus: systemctl reload dbus), or its user reachabilityd does not exist"
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
            "it is not running and the bus cannot start it: install \(name).service in "
                + "/usr/share/dbus-1/system-services, then reload the bus (systemctl reload dbus)"
        case let name where name.hasPrefix("org.freedesktop.DBus.Error.Spawn."):
            "the bus could not start it (\(error.message)); its log says why: journalctl -u reachabilityd"
        case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Timeout",
            "org.freedesktop.DBus.Error.TimedOut":
            activatable ? "it was started but did not answer in time (journalctl -u reachabilityd)"
                : "it did not answer in time"
        default:
            "\(error.name): \(error.message)"
        }
    }

    /// The prefix reachctl is installed under (`/usr` for `/usr/bin/reachctl`).
    static func installationPrefix() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return "/usr" }
        let path = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        return parts.count > 2 ? parts.dropLast(2).joined(separator: "/") : "/usr"
    }

    /// The first `directory/file` that exists, without repeating a directory.
    static func find(_ file: String, in directories: [String]) -> String? {
        var seen: Set<String> = []
        for directory in directories where seen.insert(directory).inserted {
            let path = directory + "/" + file
            if access(path, R_OK) == 0 { return path }
        }
        return nil
    }

    static func userName(_ uid: UInt32) -> String {
        guard let entry = getpwuid(uid), let name = entry.pointee.pw_name else { return "uid \(uid)" }
        return "\(String(cString: name)) (uid \(uid))"
    }
}
