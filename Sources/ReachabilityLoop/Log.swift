#if canImport(Glibc)
import Glibc
#endif

/// The service's log: plain lines on standard error (journald adds the rest).
public enum Log {
    /// Set once by the command line before the loop starts, only read afterwards,
    /// and only from the loop thread: no concurrent access exists.
    nonisolated(unsafe) public static var verbose = false
    /// The name each line starts with; `nil` keeps quiet (a library inside
    /// someone else's program). Set, like `verbose`, before any loop runs.
    nonisolated(unsafe) public static var program: String? = "reachabilityd"

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
