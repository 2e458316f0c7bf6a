#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The service's log: plain lines on standard error (journald adds the rest).
public enum Log {
    private struct Settings {
        var verbose = false
        var program: String? = "reachabilityd"
    }

    private static let settings = Mutex(Settings())

    /// Whether debug lines are written.
    public static var verbose: Bool {
        get { settings.withLock { $0.verbose } }
        set { settings.withLock { $0.verbose = newValue } }
    }

    /// The name each line starts with; `nil` keeps quiet (a library inside
    /// someone else's program).
    public static var program: String? {
        get { settings.withLock { $0.program } }
        set { settings.withLock { $0.program = newValue } }
    }

    public static func info(_ message: @autoclosure () -> String) { write("", message()) }
    public static func debug(_ message: @autoclosure () -> String) {
        if verbose { write("debug: ", message()) }
    }
    public static func warning(_ message: @autoclosure () -> String) { write("warning: ", message()) }
    public static func error(_ message: @autoclosure () -> String) { write("error: ", message()) }

    private static func write(_ level: String, _ message: String) {
        guard let program else { return }
        var line = program + ": " + level + message + "\n"
        line.withUTF8 { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = Glibc.write(2, buffer.baseAddress! + offset, buffer.count - offset)
                if n <= 0 { break }
                offset += n
            }
        }
    }
}
