import ArgumentParser
import Glibc
import ReachabilitydClient

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
            every change the daemon announces, and never on a timer: point node_exporter's \
            --collector.textfile.directory at FILE's directory, and name FILE *.prom.
            """)

    @Option(name: .long, help: ArgumentHelp("Keep FILE up to date instead of printing once.", valueName: "FILE"))
    var textfile: String?

    func validate() throws {
        if let textfile, textfile.isEmpty || textfile.hasSuffix("/") {
            throw ValidationError("--textfile needs a file name, not \"\(textfile)\"")
        }
    }

    func run() async throws {
        guard let textfile else {
            let text = try await NetworkReachabilityManager.daemonMetrics()
            Output.line(text.hasSuffix("\n") ? String(text.dropLast()) : text)
            return
        }
        for try await text in NetworkReachabilityManager.daemonMetricsUpdates() {
            try TextFile.replace(textfile, with: text)
        }
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
        guard fd >= 0 else { throw Failure(description: "cannot write \(temporary): \(reason())") }
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
}
