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

    /// The logger the library hands to everything it makes, once per process: with
    /// `REACHABILITY_DEBUG` set (and not `0`), every record on standard error (a
    /// ``SystemLog`` at `debug`); otherwise the application's (``ApplicationLogHandler``).
    static func libraryLogger(debug: String?) -> Logger {
        if let debug, !debug.isEmpty, debug != "0" {
            return SystemLog(program: "reachability", level: .debug).logger
        }
        return Logger(label: label) { _ in ApplicationLogHandler() }
    }
}

/// The library's records, handed to the application's logger of the moment
/// (``ReachabilityLogging/effectiveLogger``): a logger set, or swift-log bootstrapped,
/// after the library made its own is still honoured. Its level is that logger's, so a
/// record the application would drop is never made. Each record keeps its `source`
/// (the library's module that wrote it), `file` and `line`.
struct ApplicationLogHandler: LogHandler {
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    /// The application's logger's level (`critical` while nobody listens); the application
    /// sets it on its own logger, so setting it here does nothing.
    var logLevel: Logger.Level {
        get { ReachabilityLogging.effectiveLogger?.logLevel ?? .critical }
        set {}
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        guard let logger = ReachabilityLogging.effectiveLogger else { return }
        var merged = metadata.merging(metadataProvider?.get() ?? [:]) { _, provided in provided }
        if let explicit = event.metadata { merged.merge(explicit) { _, explicit in explicit } }
        logger.log(level: event.level, event.message, error: event.error, metadata: merged.isEmpty ? nil : merged,
                   source: event.source, file: event.file, function: event.function, line: event.line)
    }
}
