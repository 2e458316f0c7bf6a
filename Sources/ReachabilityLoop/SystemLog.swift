#if canImport(Glibc)
import Glibc
#endif
import Logging
import Synchronization

/// A service's log, written the way systemd's own daemons write theirs:
///
/// - to the journal in its native protocol (a datagram of `FIELD=value` lines on
///   `/run/systemd/journal/socket`) when `JOURNAL_STREAM` names standard error,
///   with the priority, a `MESSAGE_ID` for the events an administrator looks for,
///   and fields such as `REACH_TARGET` and `REACH_CLIENT`;
/// - with `<N>` priority prefixes on any other stream that is not a terminal
///   (journald, syslog and `systemd-cat` read them);
/// - as plain text on a terminal.
///
/// The daemon makes one in `main` and hands its ``logger`` to everything it makes;
/// `org.freedesktop.LogControl1` changes ``level`` and ``target`` at run time, for
/// every copy of that logger at once. No libsystemd: the protocols are documented
/// (systemd's "Native Journal Protocol", `JOURNAL_STREAM` in systemd.exec(5)).
public final class SystemLog: Sendable {
    /// The name each line is written under (`SYSLOG_IDENTIFIER`).
    public let program: String
    /// The least important priority written (its raw value): read before every record is
    /// made, so an atomic rather than a lock.
    private let priority: Atomic<Int32>
    private let output: Mutex<Output>

    private struct Output {
        /// `nil`: chosen from the environment (``environmentTarget``).
        var target: Log.Target?
        var kmsg: Int32 = -1
        var socket: Int32 = -1
    }

    /// `target` `nil`: the journal when `JOURNAL_STREAM` names standard error, else the console.
    public init(program: String, level: Log.Priority = .info, target: Log.Target? = nil) {
        self.program = program
        priority = Atomic(level.rawValue)
        output = Mutex(Output(target: target))
    }

    deinit {
        output.withLock { Self.close(&$0) }
    }

    /// A logger whose records this log writes. Copies share ``level``: `LogControl1` has one
    /// level for the whole service, so setting a copy's `logLevel` sets it for all.
    public var logger: Logger {
        Logger(label: program) { _ in SystemLogHandler(log: self) }
    }

    /// The least important priority written (`LogControl1.LogLevel`).
    public var level: Log.Priority {
        get { Log.Priority(rawValue: priority.load(ordering: .relaxed)) ?? .info }
        set { priority.store(newValue.rawValue, ordering: .relaxed) }
    }

    /// Whether a record of `priority` would be written (asked before it is made).
    public func wants(_ priority: Log.Priority) -> Bool {
        priority.rawValue <= self.priority.load(ordering: .relaxed)
    }

    /// Where records go: chosen from the environment until set.
    public var target: Log.Target {
        output.withLock { $0.target } ?? Self.environmentTarget
    }

    /// Sets the target, or (`nil`) goes back to choosing it from the environment.
    public func setTarget(_ target: Log.Target?) {
        output.withLock { output in
            output.target = target
            Self.close(&output)
        }
    }

    private static func close(_ output: inout Output) {
        if output.kmsg >= 0 { Glibc.close(output.kmsg) }
        if output.socket >= 0 { Glibc.close(output.socket) }
        output.kmsg = -1
        output.socket = -1
    }

    /// Writes one record if `priority` is at or above ``level``: `messageID` and `fields`
    /// (journal field names; made only for the journal) go to the journal, the text everywhere.
    public func write(_ priority: Log.Priority, _ text: String, messageID: String? = nil,
                      fields: @autoclosure () -> [(String, String)] = []) {
        guard wants(priority) else { return }
        switch output.withLock({ $0.target }) ?? Self.environmentTarget {
        case .null: return
        case .console: writeConsole(priority, text)
        case .journal:
            if !sendJournal(priority, text, messageID, fields()) { writeConsole(priority, text) }
        case .kmsg:
            if !writeKmsg(priority, text) { writeConsole(priority, text) }
        case .syslog:
            if !sendSyslog(priority, text) { writeConsole(priority, text) }
        }
    }

    /// The kernel's log buffer, opened on first use and kept until the target changes.
    func kmsgDescriptor() -> Int32 {
        output.withLock { output in
            if output.kmsg < 0 { output.kmsg = open("/dev/kmsg", O_WRONLY | O_CLOEXEC | O_NOCTTY) }
            return output.kmsg
        }
    }

    /// A non-blocking datagram socket, made on first use and kept until the target changes.
    func datagramSocket() -> Int32 {
        output.withLock { output in
            if output.socket < 0 { output.socket = UnixDatagram.openSocket() }
            return output.socket
        }
    }
}

/// The daemon's swift-log handler: each record goes to its ``SystemLog``, with the
/// event's id as `MESSAGE_ID` and every other metadata key as a `REACH_…` field
/// (`backend.mode` → `REACH_BACKEND_MODE`). Its level is the log's.
public struct SystemLogHandler: LogHandler {
    public let log: SystemLog
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?

    public init(log: SystemLog) { self.log = log }

    /// The log's level (one for the whole service, which `LogControl1` sets).
    public var logLevel: Logger.Level {
        get { log.level.level }
        nonmutating set { log.level = Log.Priority(newValue) }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        // The logger compared swift-log's levels; a service set to `alert` keeps out `crit` too.
        let priority = Log.Priority(event.level)
        guard log.wants(priority) else { return }
        let metadata = merged(event.metadata)
        log.write(priority, event.message.description, messageID: metadata[Log.Event.metadataKey].map(Self.text),
                  fields: Self.fields(metadata, error: event.error))
    }

    /// What the journal gets of `event`: its priority, text, `MESSAGE_ID` and fields.
    func record(_ event: LogEvent)
        -> (priority: Log.Priority, text: String, messageID: String?, fields: [(String, String)])
    {
        let metadata = merged(event.metadata)
        return (Log.Priority(event.level), event.message.description,
                metadata[Log.Event.metadataKey].map(Self.text), Self.fields(metadata, error: event.error))
    }

    /// The handler's metadata, its provider's, then the call's (which win). Most records carry
    /// only their own: then nothing is merged.
    private func merged(_ explicit: Logger.Metadata?) -> Logger.Metadata {
        let provided = metadataProvider?.get() ?? [:]
        if metadata.isEmpty && provided.isEmpty { return explicit ?? [:] }
        var merged = metadata.merging(provided) { _, provided in provided }
        if let explicit { merged.merge(explicit) { _, explicit in explicit } }
        return merged
    }

    /// Every key but the event's id as a `REACH_…` field, sorted (metadata has no order), and
    /// the record's error as `REACH_ERROR`.
    private static func fields(_ metadata: Logger.Metadata, error: (any Error)?) -> [(String, String)] {
        var fields: [(String, String)] = []
        fields.reserveCapacity(metadata.count + 1)
        for (key, value) in metadata where key != Log.Event.metadataKey {
            fields.append((Log.journalField(key), text(value)))
        }
        if let error { fields.append(("REACH_ERROR", "\(error)")) }
        if fields.count > 1 { fields.sort { $0.0 < $1.0 } }
        return fields
    }

    private static func text(_ value: Logger.MetadataValue) -> String {
        if case .string(let string) = value { return string }
        return value.description
    }
}
