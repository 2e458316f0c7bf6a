import Logging
import Synchronization

// MARK: TEMPORARY (issue 29): the old static log, until its last callers take a `Logger`
//
// Every module takes a `Logger` now, except files another change is reshaping at the same
// time: ReachabilityRuntime (Runtime, DaemonBackend, Logging), and TargetEvaluator,
// Resolver, TargetRegistry. They still call `Log.debug(…)` and friends, and the
// initialisers they call (`BusConnection(_:)`, `NetworkObserver(mode:onChange:)`) take
// ``Log/compatibilityLogger`` by default. Both lead to one place per process: the
// library's ``Log/handler`` (the application's swift-log), or else the ``Log/processLog``
// the daemon's `main` sets (its own `SystemLog`). Delete this file, and those defaults,
// once the files above pass their `Logger` down.

extension Log {
    /// One log record, as a ``handler`` receives it.
    public struct Record: Sendable {
        public let priority: Priority
        public let message: String
        public let event: Event?
        /// Journal field names (upper case, `REACH_…`) and their values.
        public let fields: [(String, String)]
        /// Where it was written: `Module/File.swift` (`#fileID`) and the line.
        public let fileID: String
        public let line: UInt

        /// The module that wrote it (the first part of ``fileID``).
        public var module: String { String(fileID.prefix { $0 != "/" }) }
    }

    /// Takes the records a library's application wants.
    public struct Handler: Sendable {
        /// Whether a record of this priority would be kept: asked before the record is made,
        /// so a record the application drops costs no message.
        public let wants: @Sendable (Priority) -> Bool
        public let take: @Sendable (Record) -> Void

        public init(wants: @escaping @Sendable (Priority) -> Bool, take: @escaping @Sendable (Record) -> Void) {
            self.wants = wants
            self.take = take
        }
    }

    /// Apart from each other: a struct holding both a closure and the rest read back as zeros
    /// from its Mutex in optimised builds (Swift 6.3).
    private static let handlerBox = Mutex<Handler?>(nil)
    private static let processBox = Mutex<SystemLog?>(nil)

    /// TEMPORARY. Takes every record of the static log (a library hands them to the
    /// application's logger); `nil`: ``processLog`` writes them.
    public static var handler: Handler? {
        get { handlerBox.withLock { $0 } }
        set { handlerBox.withLock { $0 = newValue } }
    }

    /// TEMPORARY. Where the static log writes without a ``handler``: the daemon's own log
    /// (its `main` sets it), a library's with `REACHABILITY_DEBUG` (``program``), or nowhere.
    public static var processLog: SystemLog? {
        get { processBox.withLock { $0 } }
        set { processBox.withLock { $0 = newValue } }
    }

    /// TEMPORARY. The name ``processLog`` writes under; setting it makes a new one at `info`,
    /// `nil` none.
    public static var program: String? {
        get { processLog?.program }
        set { processLog = newValue.map { SystemLog(program: $0) } }
    }

    /// TEMPORARY. Whether ``processLog`` writes debug records.
    public static var verbose: Bool {
        get { processLog?.level == .debug }
        set { processLog?.level = newValue ? .debug : .info }
    }

    /// TEMPORARY. A logger for the initialisers whose callers are not converted yet: its
    /// records take the static log's way (``handler``, else ``processLog``), as they did.
    public static var compatibilityLogger: Logger {
        Logger(label: "reachability") { _ in CompatibilityLogHandler() }
    }

    public static func error(_ message: @autoclosure () -> String, _ event: Event? = nil,
                             _ fields: @autoclosure () -> KeyValuePairs<String, String> = [:],
                             fileID: String = #fileID, line: UInt = #line) {
        log(.err, message(), event, fields(), fileID: fileID, line: line)
    }
    public static func warning(_ message: @autoclosure () -> String, _ event: Event? = nil,
                               _ fields: @autoclosure () -> KeyValuePairs<String, String> = [:],
                               fileID: String = #fileID, line: UInt = #line) {
        log(.warning, message(), event, fields(), fileID: fileID, line: line)
    }
    public static func notice(_ message: @autoclosure () -> String, _ event: Event? = nil,
                              _ fields: @autoclosure () -> KeyValuePairs<String, String> = [:],
                              fileID: String = #fileID, line: UInt = #line) {
        log(.notice, message(), event, fields(), fileID: fileID, line: line)
    }
    public static func info(_ message: @autoclosure () -> String, _ event: Event? = nil,
                            _ fields: @autoclosure () -> KeyValuePairs<String, String> = [:],
                            fileID: String = #fileID, line: UInt = #line) {
        log(.info, message(), event, fields(), fileID: fileID, line: line)
    }
    public static func debug(_ message: @autoclosure () -> String, _ event: Event? = nil,
                             _ fields: @autoclosure () -> KeyValuePairs<String, String> = [:],
                             fileID: String = #fileID, line: UInt = #line) {
        log(.debug, message(), event, fields(), fileID: fileID, line: line)
    }

    /// TEMPORARY. Writes one record if whoever takes it wants its priority.
    public static func log(_ priority: Priority, _ message: @autoclosure () -> String, _ event: Event? = nil,
                           _ fields: @autoclosure () -> KeyValuePairs<String, String> = [:],
                           fileID: String = #fileID, line: UInt = #line) {
        forward(priority, message(), event, Array(fields()), fileID: fileID, line: line)
    }

    static func forward(_ priority: Priority, _ message: @autoclosure () -> String, _ event: Event?,
                        _ fields: @autoclosure () -> [(String, String)], fileID: String, line: UInt) {
        if let handler {
            guard handler.wants(priority) else { return }
            handler.take(Record(priority: priority, message: message(), event: event, fields: fields(),
                                fileID: fileID, line: line))
            return
        }
        guard let log = processLog, log.wants(priority) else { return }
        log.write(priority, message(), messageID: event?.id, fields: fields())
    }

    /// The most verbose level anyone takes records at now (`critical` when nobody takes any).
    static var compatibilityLevel: Logger.Level {
        if let handler {
            return Priority.allCases.reversed().first(where: handler.wants)?.level ?? .critical
        }
        return processLog?.level.level ?? .critical
    }
}

/// TEMPORARY. Hands a swift-log record to the static log (``Log/compatibilityLogger``).
struct CompatibilityLogHandler: LogHandler {
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    var logLevel: Logger.Level {
        get { Log.compatibilityLevel }
        set {}
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata.merging(metadataProvider?.get() ?? [:]) { _, provided in provided }
        if let explicit = event.metadata { merged.merge(explicit) { _, explicit in explicit } }
        let id = merged.removeValue(forKey: Log.Event.metadataKey).map { Log.Event(id: "\($0)") }
        let fields = merged.map { (Log.journalField($0.key), "\($0.value)") }.sorted { $0.0 < $1.0 }
        Log.forward(Log.Priority(event.level), "\(event.message)", id, fields, fileID: event.file, line: event.line)
    }
}
