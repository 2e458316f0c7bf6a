import Logging
import ReachabilityLoop
import Synchronization

/// The library's log belongs to the application: its records (why a manager answers
/// in-process, that the daemon left the bus or came back, a reply it did not expect)
/// go to a swift-log `Logger`, so an application sees them wherever it sends its own.
///
/// Set ``logger`` to choose one. Unset, the library logs through
/// `Logger(label: "io.github.reachabilityd.Reachability")`, made by the handler the
/// application bootstrapped (`LoggingSystem.bootstrap`); an application that never
/// bootstrapped swift-log (its default is a `StreamLogHandler`) hears nothing, as
/// before. Levels follow swift-log's advice for libraries: `info` for a fallback
/// (the daemon is not there, the bus went away), `debug` for the rest, and a record
/// the library cannot explain (a reply of the wrong type) at `error`. Metadata keys
/// are dotted (`target`, `client`).
///
/// `REACHABILITY_DEBUG=1` in the environment still writes every record to standard
/// error directly, whatever the application chose.
public enum ReachabilityLogging {
    /// The label of the default logger.
    public static let label = "io.github.reachabilityd.Reachability"

    private static let chosen = Mutex<Logger?>(nil)

    /// The logger the library writes to; `nil` (the default): the labelled one above.
    public static var logger: Logger? {
        get { chosen.withLock { $0 } }
        set { chosen.withLock { $0 = newValue } }
    }

    /// Where a record goes now: the chosen logger, or the labelled default unless the
    /// application left swift-log unbootstrapped. Made for each record (records are
    /// few), so a bootstrap after the library's first record is honoured.
    static var effectiveLogger: Logger? {
        if let logger { return logger }
        let made = Logger(label: label)
        return made.handler is StreamLogHandler ? nil : made
    }

    /// Hands the library's records to swift-log (called once, when the library starts).
    /// A record below the logger's level is never made; the others keep where they were
    /// written (`source` is the library's module, `file` and `line` the call's).
    static func install() {
        Log.handler = Log.Handler(
            wants: { priority in effectiveLogger.map { $0.logLevel <= level(priority) } ?? false },
            take: { record in
                guard let logger = effectiveLogger else { return }
                var metadata: Logger.Metadata = [:]
                for (key, value) in record.fields { metadata[metadataKey(key)] = .string(value) }
                if let event = record.event { metadata["message.id"] = .string(event.id) }
                logger.log(level: level(record.priority), "\(record.message)", metadata: metadata,
                           source: record.module, file: record.fileID, function: "", line: record.line)
            })
    }

    /// `REACH_BACKEND_MODE` → `backend.mode`.
    static func metadataKey(_ field: String) -> String {
        let name = field.hasPrefix("REACH_") ? field.dropFirst(6) : Substring(field)
        return String(name.lowercased().map { $0 == "_" ? "." : $0 })
    }

    static func level(_ priority: Log.Priority) -> Logger.Level {
        switch priority {
        case .emerg, .alert, .crit: .critical
        case .err: .error
        case .warning: .warning
        case .notice: .notice
        case .info: .info
        case .debug: .debug
        }
    }
}
