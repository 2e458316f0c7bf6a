import ArgumentParser
import Dispatch
import Glibc
import ReachabilityRuntime
import ReachabilitydClientCore
import Synchronization

/// `reachctl metrics`: the daemon's metrics in the Prometheus text format, printed
/// once, or kept in a file for node_exporter's textfile collector.
struct Metrics: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print reachabilityd's metrics (Prometheus text format); root and the adm group only.",
        discussion: """
            The state of every watched target (reachable, and its flags as labels), its changes, \
            the backend, NetworkManager's returns, evaluation times, lookups in flight and the clients, \
            from reachabilityd on the system bus (it opens no TCP port). With --textfile, reachctl keeps \
            running and rewrites FILE (a temporary file in the same directory, renamed over it) after \
            every change the daemon announces, and every --liveness seconds after asking the service \
            again with a bound (a service that holds its name but does not answer is written as \
            reachability_up 0) and with the time of writing: point node_exporter's \
            --collector.textfile.directory at FILE's directory, and name FILE *.prom. The unit \
            reachabilityd-metrics-textfile.service runs it, and leaves FILE saying that the writer \
            stopped (reachctl_textfile_writer_up 0) when it stops.
            """)

    @Option(name: .long, help: ArgumentHelp("Keep FILE up to date instead of printing once.", valueName: "FILE"))
    var textfile: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp(
        "With --textfile: rewrite FILE at least this often, with the time in "
            + "reachctl_textfile_updated_timestamp_seconds, so that its age tells a stopped writer from "
            + "a quiet network (the daemon is not asked again).", valueName: "SECONDS"))
    var liveness: Int = 30

    func validate() throws {
        if let textfile, textfile.isEmpty || textfile.hasSuffix("/") {
            throw ValidationError("--textfile needs a file name, not \"\(textfile)\"")
        }
        guard (1...86_400).contains(liveness) else {
            throw ValidationError("--liveness takes a whole number of seconds from 1 to 86400")
        }
    }

    func run() async throws {
        guard let textfile else {
            let text = try await NetworkReachabilityManager.daemonMetrics()
            Output.line(text.hasSuffix("\n") ? String(text.dropLast()) : text)
            return
        }
        let writer = TextFileWriter(path: textfile)
        // The writer's own heartbeat, from a timer handing over to the main queue (where this
        // command's tasks run: no thread pool is started; the timer is the runtime's loop's,
        // see `LoopTimer`): the live service is asked for its metrics
        // (bounded by `askTimeout`), so that a hung service — one that holds its name but no
        // longer answers — is written as reachability_up 0, not repeated as if fresh; then the
        // file is rewritten with the time. The daemon itself never wakes on a timer: this
        // opt-in writer asks it once per --liveness.
        let ask = Self.askTimeout(liveness: liveness)
        let heartbeat = LoopTimer.every(seconds: UInt32(liveness), on: .main) {
            MainQueueExecutor.start { await writer.beat(askingWithin: ask) }
        }
        defer { heartbeat.cancel() }
        // An empty text: the daemon left the bus (stopped, or failed). The file then says so
        // (reachability_up 0, no target's last values), until it is back.
        for try await text in NetworkReachabilityManager.daemonMetricsUpdates() {
            try writer.write(text)
        }
    }

    /// How long a heartbeat waits for the service: 10 s, or half of --liveness when that is
    /// shorter. A service hung just after a heartbeat is written as down at the next one's
    /// timeout: within --liveness plus this (40 s with the default 30 s).
    static func askTimeout(liveness: Int) -> Int32 { Int32(min(10_000, liveness * 500)) }
}

/// The textfile's last metrics, and the liveness sample written after them.
final class TextFileWriter: Sendable {
    let path: String
    private struct Last {
        /// The daemon's last text ("" while it is not on the bus); `nil` before the first.
        var text: String?
        /// It holds its name but did not answer the last heartbeat's question in time.
        var hung = false
        /// Counts the writes the follower made, so that a heartbeat's late answer does not
        /// overwrite a newer one.
        var writes = 0
    }

    private let last = Mutex(Last())

    init(path: String) { self.path = path }

    /// `text` from the daemon, or "" when it is not on the bus.
    func write(_ text: String) throws(TextFile.Failure) {
        last.withLock {
            $0.text = text
            $0.hung = false
            $0.writes += 1
        }
        try TextFile.replace(path, with: Self.content(text, now: Int(time(nil))))
    }

    /// The heartbeat: the live service asked again (when it is on the bus), the file rewritten.
    func beat(askingWithin timeout: Int32) async {
        let (text, writes) = last.withLock { ($0.text, $0.writes) }
        if let text, !text.isEmpty {
            let fresh: String?
            do {
                // Never started for this: a stop stays a stop (the follower says it left).
                fresh = try await NetworkReachabilityManager.daemonMetrics(timeoutMilliseconds: timeout,
                                                                           startingTheService: false)
            } catch .serviceUnavailable(let why) where why.contains("did not answer") {
                fresh = nil
            } catch {
                // Any other refusal (it left meanwhile: the follower says so) is no hang.
                fresh = text
            }
            let current = last.withLock { state -> Bool in
                guard state.writes == writes else { return false }
                if let fresh { state.text = fresh }
                if fresh == nil && !state.hung {
                    state.hung = true
                    Output.error("""
                        reachabilityd holds its name but did not answer within \(timeout / 1000) s: \
                        writing reachability_up 0 until it answers
                        """)
                } else if fresh != nil && state.hung {
                    state.hung = false
                    Output.error("reachabilityd answers again")
                }
                return true
            }
            guard current else { return }
        }
        do throws(TextFile.Failure) { try rewrite() } catch { Output.error(error.description) }
    }

    func rewrite() throws(TextFile.Failure) {
        let (text, hung) = last.withLock { ($0.text, $0.hung) }
        guard let text else { return }
        try TextFile.replace(path, with: Self.content(hung ? "" : text, now: Int(time(nil))))
    }

    /// What the file holds: whether the daemon is there, its metrics, and the liveness sample.
    static func content(_ text: String, now: Int) -> String {
        let up = """
            # HELP reachability_up Whether reachabilityd was on the system bus and answered when reachctl metrics \
            --textfile last wrote this file (0: it was not, or did not answer in time, and the file holds none \
            of its metrics).
            # TYPE reachability_up gauge
            reachability_up \(text.isEmpty ? 0 : 1)

            """
        return up + text + (text.isEmpty || text.hasSuffix("\n") ? "" : "\n") + liveness(now: now)
    }

    /// The writer's own samples. Its unit's `ExecStopPost=` replaces the file with
    /// `reachctl_textfile_writer_up 0` and the time it stopped (data/reachabilityd-metrics-textfile.service),
    /// so the alerts tell a stopped writer from a node without reachabilityd (docs/metrics.md).
    static func liveness(now: Int) -> String {
        """
        # HELP reachctl_textfile_writer_up Whether reachctl metrics --textfile keeps this file (1), or its unit \
        stopped and left it holding only this and when (0).
        # TYPE reachctl_textfile_writer_up gauge
        reachctl_textfile_writer_up 1
        # HELP reachctl_textfile_updated_timestamp_seconds When reachctl metrics --textfile last wrote this \
        file (at least every --liveness seconds while it runs).
        # TYPE reachctl_textfile_updated_timestamp_seconds gauge
        reachctl_textfile_updated_timestamp_seconds \(now)

        """
    }
}

/// A file rewritten whole, so that a reader sees the old content or the new, never a part.
enum TextFile {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Writes `text` to a temporary file beside `path` and renames it over `path`.
    static func replace(_ path: String, with text: String) throws(Failure) {
        let temporary = path + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            let error = errno
            throw Failure(description: "cannot write \(temporary): \(reason())" + hint(error, directoryOf: path))
        }
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                let why = reason()
                close(fd)
                unlink(temporary)
                throw Failure(description: "cannot write \(temporary): \(why)")
            }
            offset += n
        }
        close(fd)
        guard rename(temporary, path) == 0 else {
            let why = reason()
            unlink(temporary)
            throw Failure(description: "cannot rename \(temporary) to \(path): \(why)")
        }
    }

    private static func reason() -> String { String(cString: strerror(errno)) }

    /// What to do when the file cannot be made: the directory is node_exporter's textfile
    /// collector's, which its package makes (root's, mode 755), and this user must be let write.
    private static func hint(_ error: Int32, directoryOf path: String) -> String {
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        switch error {
        case ENOENT:
            return " (the directory \(directory) does not exist: it is node_exporter's textfile collector's, "
                + "made by its package; see reachctl(1), FILES)"
        case EACCES, EPERM, EROFS:
            let user = getpwuid(geteuid()).map { String(cString: $0.pointee.pw_name) } ?? "uid \(geteuid())"
            return " (\(user) may not write in \(directory): setfacl -m u:\(user):rwx \(directory); "
                + "see reachctl(1), FILES)"
        default:
            return ""
        }
    }
}
