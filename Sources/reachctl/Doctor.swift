import ArgumentParser
import Dispatch
import Glibc
import ReachabilitydClientCore
import Synchronization

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
        // Bounded: a daemon that started answers within a second, and a start that fails
        // ends the wait as soon as systemd logs it (dbus-daemon is not told: its caller
        // would wait for the whole timeout); the unit's own state says the rest.
        let outcome = await Self.checkOrStartFailure()
        let prefix = Self.installationPrefix()
        let policy = Self.find("\(Self.name).conf", in: [
            "\(prefix)/share/dbus-1/system.d", "/usr/share/dbus-1/system.d", "/etc/dbus-1/system.d"])
        let activation = Self.find("\(Self.name).service", in: [
            "\(prefix)/share/dbus-1/system-services", "/usr/share/dbus-1/system-services",
            "/usr/local/share/dbus-1/system-services", "/lib/dbus-1/system-services"])
        row("policy file", policy ?? "not found (dbus-1/system.d of \(prefix), /usr/share or /etc)")
        row("activation file", activation ?? "not found (dbus-1/system-services of \(prefix) or /usr/share)")

        guard case .checked(let check) = outcome else {
            row("system bus", "connected")
            row("activatable", "yes: the bus asked systemd to start \(Self.unit)")
            row("answers", "no: systemd says its start failed")
            let unit = Self.unitReport()
            if let unit {
                row("unit", unit.summary)
                for line in unit.journal { row("journal", line) }
            }
            try fail(unit?.cause ?? "\(Self.unit) failed to start; more: journalctl -u reachabilityd")
        }
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
            let unit = Self.unitReport()
            if let unit {
                row("unit", unit.summary)
                for line in unit.journal { row("journal", line) }
            }
            if let hang = Self.hang(check) {
                row("hung", hang.detail)
                try fail(hang.sentence)
            }
            try fail(Self.sentence(for: error, activatable: check.isActivatable, unit: unit))
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
        // One full stop, whatever the sentence quoted ends with.
        var sentence = sentence
        while sentence.hasSuffix(".") { sentence.removeLast() }
        Output.line("reachabilityd does not work: \(sentence).")
        throw ExitCode(ExitStatus.failure)
    }

    static let callTimeout: Int32 = 8_000

    enum Outcome: Sendable {
        case checked(ReachabilityServiceCheck)
        /// systemd logged that the unit's start failed before the call ended.
        case startFailed
    }

    /// The service check, or sooner the news that systemd could not start the unit.
    /// dbus-broker ends an activation that failed at once; dbus-daemon is not told by
    /// systemd and lets the call run to its timeout. So, where systemd runs and the journal
    /// is readable, a `journalctl --follow` (woken by the journal's inotify, no polling)
    /// waits beside the call for systemd's "Failed to start" record of the unit.
    static func checkOrStartFailure() async -> Outcome {
        // A masked unit that is not running cannot answer through systemd: dbus-daemon
        // answers UnitMasked at once when the unit is inactive, but lets the call run to its
        // timeout when the unit failed before it was masked. One second is enough for a
        // daemon started some other way to answer.
        let now = unitProperties()
        let timeout = now["LoadState"] == "masked" && now["ActiveState"] != "active" ? 1_000 : callTimeout
        let watch = StartFailureWatch.start()
        defer { watch?.stop() }
        return await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
            let once = Mutex<CheckedContinuation<Outcome, Never>?>(continuation)
            let resume: @Sendable (Outcome) -> Void = { outcome in once.withLock { $0.take() }?.resume(returning: outcome) }
            Task { resume(.checked(await NetworkReachabilityManager.checkService(timeoutMilliseconds: timeout))) }
            if let watch {
                DispatchQueue.global().async { if watch.waitForLine() { resume(.startFailed) } }
            }
        }
    }

    /// `journalctl --follow` for systemd's record that the unit's start job failed
    /// (`MESSAGE_ID` of "Failed to start", `JOB_RESULT=failed`), from just before the call.
    final class StartFailureWatch: Sendable {
        let pid: pid_t
        let fd: Int32

        private init(pid: pid_t, fd: Int32) { self.pid = pid; self.fd = fd }

        static let failedMessage = "be02cf6855d2428ba40df7e9d022f03d"

        static func start() -> StartFailureWatch? {
            guard access("/run/systemd/system", F_OK) == 0 else { return nil }
            var now = timespec()
            clock_gettime(CLOCK_REALTIME, &now)
            let since = "@\(now.tv_sec).\(String(now.tv_nsec / 1000).leftPadded(to: 6))"
            let argv = ["timeout", "\(callTimeout / 1000 + 1)", "journalctl", "--follow", "--since=\(since)",
                        "--output=cat", "--no-pager", "--quiet", "_PID=1", "UNIT=\(unit)",
                        "MESSAGE_ID=\(failedMessage)"]
            var pipe: [Int32] = [0, 0]
            guard Glibc.pipe(&pipe) == 0 else { return nil }
            _ = fcntl(pipe[0], F_SETFD, FD_CLOEXEC)
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_adddup2(&actions, pipe[1], 1)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
            // A clean signal state: the signals reachctl blocks or ignores would be the
            // child's too, and neither timeout's alarm nor the stop below would end it.
            var attributes = posix_spawnattr_t()
            posix_spawnattr_init(&attributes)
            defer { posix_spawnattr_destroy(&attributes) }
            var signals = sigset_t()
            sigemptyset(&signals)
            posix_spawnattr_setsigmask(&attributes, &signals)
            sigfillset(&signals)
            posix_spawnattr_setsigdefault(&attributes, &signals)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
            var pid: pid_t = 0
            let environment = ["LC_ALL=C", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0", "PATH=/usr/bin:/bin:/usr/sbin:/sbin"]
            let spawned = withCStrings(argv) { cArgv in
                withCStrings(environment) { cEnv in posix_spawnp(&pid, "timeout", &actions, &attributes, cArgv, cEnv) }
            }
            close(pipe[1])
            guard spawned == 0 else {
                close(pipe[0])
                return nil
            }
            return StartFailureWatch(pid: pid, fd: pipe[0])
        }

        /// Blocks until journalctl prints a line (true) or ends (false).
        func waitForLine() -> Bool {
            var byte: UInt8 = 0
            while true {
                let n = read(fd, &byte, 1)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { return false }
                if byte == UInt8(ascii: "\n") { return true }
            }
        }

        func stop() {
            kill(pid, SIGTERM)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            close(fd)
        }
    }
    static let unit = "reachabilityd.service"

    /// What a failed call means, in words: the unit's own state first when systemd has
    /// one to tell (a start that failed, a masked unit), whatever the bus's error.
    static func sentence(for error: ReachabilityServiceCheck.CallError, activatable: Bool,
                         unit: UnitReport? = nil) -> String {
        if let cause = unit?.cause { return cause }
        switch error.name {
        case "org.freedesktop.DBus.Error.AccessDenied":
            return "the bus refused the call: its policy (\(name).conf in /usr/share/dbus-1/system.d) is missing or "
                + "not loaded yet (reload the bus: systemctl reload dbus), or its user reachabilityd does not exist"
        case "org.freedesktop.DBus.Error.ServiceUnknown", "org.freedesktop.DBus.Error.NameHasNoOwner":
            // dbus-broker answers NameHasNoOwner when an activation it tried failed.
            return activatable
                ? "the bus could not start it (\(error.message)); its log says why: journalctl -u reachabilityd"
                : "it is not running and the bus cannot start it: install \(name).service in "
                    + "/usr/share/dbus-1/system-services, then reload the bus (systemctl reload dbus)"
        case let name where name.hasPrefix("org.freedesktop.DBus.Error.Spawn."):
            return "the bus could not start it (\(error.message)); its log says why: journalctl -u reachabilityd"
        case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Timeout",
            "org.freedesktop.DBus.Error.TimedOut":
            return activatable ? "it was started but did not answer in time (journalctl -u reachabilityd)"
                : "it did not answer in time"
        default:
            return "\(error.name): \(error.message)"
        }
    }

    /// A daemon that holds its name but did not answer: hung (stopped by a signal, or its loop
    /// stuck), not "not running". `nil` for any other failure.
    static func hang(_ check: ReachabilityServiceCheck) -> (detail: String, sentence: String)? {
        guard check.wasRunning, let error = check.callError,
              ["org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Timeout",
               "org.freedesktop.DBus.Error.TimedOut"].contains(error.name) else { return nil }
        var detail = "it holds \(name) but did not answer within \(callTimeout / 1000) s"
        if let pid = check.ownerPID {
            detail += "; pid \(pid)"
            if let state = processState(pid) { detail += " is \(state)" }
        }
        let resume = check.ownerPID.map { "kill -CONT \($0)" } ?? "journalctl -u reachabilityd"
        return (detail, """
            it is hung: it holds its name but does not answer (\(resume)); under systemd its watchdog \
            ends and restarts it within \(hangBoundSeconds) s
            """)
    }

    /// How long systemd takes to end a hung daemon and start it again, with the shipped unit:
    /// WatchdogSec=30, TimeoutAbortSec=10 and RestartSec=1 (data/reachabilityd.service).
    static let hangBoundSeconds = 41

    /// The process's state as the kernel says it (`/proc/PID/stat`'s third field), in words.
    static func processState(_ pid: UInt32) -> String? {
        guard let file = fopen("/proc/\(pid)/stat", "r") else { return nil }
        defer { fclose(file) }
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = fread(&buffer, 1, buffer.count, file)
        let line = String(decoding: buffer[0..<count], as: UTF8.self)
        // "PID (comm) S ...": the state follows the last ')'.
        guard let close = line.lastIndex(of: ")") else { return nil }
        let rest = line[line.index(after: close)...].drop(while: { $0 == " " })
        switch rest.first {
        case "T": return "stopped (SIGSTOP)"
        case "t": return "stopped by a debugger"
        case "D": return "waiting in the kernel (uninterruptible)"
        case "Z": return "a zombie"
        case "R": return "running"
        case "S": return "sleeping"
        default: return rest.first.map { "in state \($0)" }
        }
    }

    /// The unit's state as systemd has it, and its last journal lines.
    struct UnitReport {
        var properties: [String: String]
        var journal: [String]

        var summary: String {
            let p = properties
            var text = "\(p["LoadState"] ?? "?"), \(p["ActiveState"] ?? "?") (\(p["SubState"] ?? "?"))"
            if let result = p["Result"], result != "success" { text += ", result \(result)" }
            if let status = p["ExecMainStatus"], status != "0" { text += ", exit status \(status)" }
            return text
        }

        /// The reason the unit gives, if it gives one.
        var cause: String? {
            let p = properties
            if p["LoadState"] == "masked" {
                return "\(Doctor.unit) is masked (systemctl unmask \(Doctor.unit))"
            }
            if p["LoadState"] == "not-found" {
                return "systemd has no \(Doctor.unit) (install it, then systemctl daemon-reload)"
            }
            if p["ActiveState"] == "failed" || (p["Result"].map { $0 != "success" } ?? false) {
                let last = journal.last.map { ": \($0)" } ?? ""
                return "\(Doctor.unit) failed to start (\(summary))\(last); more: journalctl -u reachabilityd"
            }
            return nil
        }
    }

    /// `systemctl show` and `journalctl` for the unit, when systemd runs; each bounded to 3 s.
    static func unitReport() -> UnitReport? {
        let properties = unitProperties()
        guard !properties.isEmpty else { return nil }
        // The service's own words only: what its processes wrote (standard output and error,
        // the journal, syslog) carries _SYSTEMD_UNIT=; the daemon's records also carry its
        // identifier, should the journal not have learnt the unit of a process that ended at
        // once. Not --unit=, which adds systemd's own lines about the unit ("Failed with
        // result", "Failed to kill control group ...") and can push the cause out of the last 5.
        let journal = output("journalctl _SYSTEMD_UNIT=\(unit) + SYSLOG_IDENTIFIER=reachabilityd "
            + "--lines=5 --output=cat --no-pager --quiet")
        return UnitReport(properties: properties, journal: journal.filter { !$0.isEmpty })
    }

    /// The unit's state from `systemctl show`; empty where systemd does not run.
    static func unitProperties() -> [String: String] {
        guard access("/run/systemd/system", F_OK) == 0 else { return [:] }
        let show = output("systemctl show --property=LoadState,ActiveState,SubState,Result,ExecMainStatus \(unit)")
        var properties: [String: String] = [:]
        for line in show {
            guard let equals = line.firstIndex(of: "=") else { continue }
            properties[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return properties
    }

    /// A command's output lines (standard error too), killed after 3 s.
    static func output(_ command: String) -> [String] {
        guard let pipe = popen("LC_ALL=C SYSTEMD_PAGER= SYSTEMD_COLORS=0 timeout 3 \(command) 2>/dev/null", "r") else {
            return []
        }
        var text = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&buffer, 1, buffer.count, pipe)
            if n <= 0 { break }
            text += buffer[..<n]
        }
        pclose(pipe)
        return String(decoding: text, as: UTF8.self).split(separator: "\n").map(String.init)
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

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

/// `argv`-style C strings for the length of `body`.
func withCStrings<R>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> R) -> R {
    var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    pointers.append(nil)
    defer { for pointer in pointers { free(pointer) } }
    return body(pointers)
}
