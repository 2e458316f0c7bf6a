#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The service's log, written the way systemd's own daemons write theirs:
///
/// - to the journal in its native protocol (a datagram of `FIELD=value` lines on
///   `/run/systemd/journal/socket`) when `JOURNAL_STREAM` names standard error,
///   with the priority, a `MESSAGE_ID` for the events an administrator looks for,
///   and fields such as `REACH_TARGET` and `REACH_CLIENT`;
/// - with `<N>` priority prefixes on any other stream that is not a terminal
///   (journald, syslog and `systemd-cat` read them);
/// - as plain text on a terminal.
///
/// `org.freedesktop.LogControl1` changes ``level`` and ``target`` at run time.
/// A library inside someone else's program routes the records to the program's
/// own log instead (``handler``). No libsystemd: the protocols are documented
/// (systemd's "Native Journal Protocol", `JOURNAL_STREAM` in systemd.exec(5)).
public enum Log {
    /// A syslog priority, as journald and `LogControl1.LogLevel` name them.
    public enum Priority: Int32, Sendable, CaseIterable, Comparable {
        case emerg = 0, alert, crit, err, warning, notice, info, debug

        /// systemd's name: `emerg`, `alert`, `crit`, `err`, `warning`, `notice`, `info`, `debug`.
        public var name: String { "\(self)" }

        public init?(name: String) {
            guard let match = Self.allCases.first(where: { $0.name == name }) else { return nil }
            self = match
        }

        public static func < (a: Priority, b: Priority) -> Bool { a.rawValue < b.rawValue }
    }

    /// Where records go (`LogControl1.LogTarget`).
    public enum Target: String, Sendable, CaseIterable {
        /// Standard error: `<N>` prefixes unless it is a terminal.
        case console
        /// The journal's native protocol.
        case journal
        /// The kernel's log buffer (`/dev/kmsg`).
        case kmsg
        /// The syslog socket (`/dev/log`), RFC 3164 lines.
        case syslog
        /// Nowhere.
        case null
    }

    /// An event worth finding: its fixed `MESSAGE_ID` (`journalctl MESSAGE_ID=…`).
    /// The ids are listed in README, "Logs"; they never change.
    public struct Event: Sendable, Hashable {
        public let id: String
        public init(id: String) { self.id = id }

        /// The daemon switched the source of its device facts (`REACH_BACKEND`).
        public static let backendSwitched = Event(id: "fa00c6ee61ec4390a2c2f5f794c7df0e")
        /// NetworkManager left the bus; the kernel's facts are used meanwhile.
        public static let networkManagerLost = Event(id: "3b72a8faf230487db934fc4db8fc3f27")
        /// NetworkManager is back on the bus, and its facts are used again.
        public static let networkManagerBack = Event(id: "70409e70b8b248a0985ae7ad23f62f20")
        /// A client reached a limit on watched targets (`REACH_CLIENT`, `REACH_TARGET`).
        public static let clientOverLimit = Event(id: "a7e0729a5d0c4c9abf6dd56c9a99bea0")
        /// The internet target became reachable, or not, or changed its way
        /// ("internet: reachable via eth0", "internet: not reachable (no carrier on wlan0)";
        /// `REACH_REASON`, `REACH_INTERFACE`).
        public static let internetChanged = Event(id: "c8cfc4f5835a477292a078ce93c1b050")
        /// The path object's usable interfaces or its reason changed (`REACH_REASON`).
        public static let pathChanged = Event(id: "d950621a64b24d8b85a3bbdefe3ebb26")
    }

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

    /// Takes the records a library's application wants, instead of the writers above.
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

    /// The environment variable that points the journal's socket elsewhere (tests,
    /// containers); unset, `/run/systemd/journal/socket`.
    public static let journalSocketVariable = "REACHABILITYD_JOURNAL_SOCKET"

    private struct Settings: Sendable {
        var level: Priority = .info
        var program: String? = "reachabilityd"
        var target: Target?
        var kmsg: Int32 = -1
        var socket: Int32 = -1
    }

    private static let settings = Mutex(Settings())
    /// Apart from `settings`: a struct holding both the closure and the rest read back as
    /// zeros from its Mutex in optimised builds (Swift 6.3), so the daemon logged nothing.
    private static let handlerBox = Mutex<Handler?>(nil)

    /// The least important priority written (`LogControl1.LogLevel`); `info` unless set.
    public static var level: Priority {
        get { settings.withLock { $0.level } }
        set { settings.withLock { $0.level = newValue } }
    }

    /// Whether debug lines are written.
    public static var verbose: Bool {
        get { level >= .debug }
        set { level = newValue ? .debug : .info }
    }

    /// The name each line is written under (`SYSLOG_IDENTIFIER`); `nil` keeps quiet
    /// (a library inside someone else's program, unless it has a ``handler``).
    public static var program: String? {
        get { settings.withLock { $0.program } }
        set { settings.withLock { $0.program = newValue } }
    }

    /// Where records go: chosen from the environment until set (the journal when
    /// `JOURNAL_STREAM` names standard error, else the console); `nil` chooses again.
    public static var target: Target {
        get { settings.withLock { $0.target } ?? environmentTarget }
        set { setTarget(newValue) }
    }

    /// Sets the target, or (`nil`) goes back to choosing it from the environment.
    public static func setTarget(_ target: Target?) {
        settings.withLock { state in
            state.target = target
            if state.kmsg >= 0 { close(state.kmsg) }
            if state.socket >= 0 { close(state.socket) }
            state.kmsg = -1
            state.socket = -1
        }
    }

    /// Takes every record instead of the writers above (a library hands them to the
    /// application's logger); `nil` writes them again.
    public static var handler: Handler? {
        get { handlerBox.withLock { $0 } }
        set { handlerBox.withLock { $0 = newValue } }
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

    /// Writes one record if `priority` is at or above ``level``.
    public static func log(_ priority: Priority, _ message: @autoclosure () -> String, _ event: Event? = nil,
                           _ fields: @autoclosure () -> KeyValuePairs<String, String> = [:],
                           fileID: String = #fileID, line: UInt = #line) {
        if let handler {
            guard handler.wants(priority) else { return }
            handler.take(Record(priority: priority, message: message(), event: event, fields: Array(fields()),
                                fileID: fileID, line: line))
            return
        }
        // One read of the settings for the record (``target``'s getter would lock them again).
        let (level, program, chosen) = settings.withLock { ($0.level, $0.program, $0.target) }
        guard priority <= level, let program else { return }
        let text = message()
        switch chosen ?? environmentTarget {
        case .null: return
        case .console: writeConsole(priority, program, text)
        case .journal:
            if !sendJournal(priority, program, text, event, fields()) { writeConsole(priority, program, text) }
        case .kmsg:
            if !writeKmsg(priority, program, text) { writeConsole(priority, program, text) }
        case .syslog:
            if !sendSyslog(priority, program, text) { writeConsole(priority, program, text) }
        }
    }

    // MARK: The writers

    /// The journal when `JOURNAL_STREAM` ("DEVICE:INODE") is standard error's, as
    /// systemd.exec(5) asks a service to check; otherwise the console. Read once.
    static let environmentTarget: Target = {
        guard let value = getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else { return .console }
        let parts = value.split(separator: ":")
        var status = stat()
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]),
              fstat(2, &status) == 0 else { return .console }
        return UInt64(status.st_dev) == device && UInt64(status.st_ino) == inode ? .journal : .console
    }()

    private static let standardErrorIsTerminal = isatty(2) == 1

    private static func writeConsole(_ priority: Priority, _ program: String, _ text: String) {
        let line: String
        if standardErrorIsTerminal {
            let label = switch priority {
            case .emerg, .alert, .crit, .err: "error: "
            case .warning: "warning: "
            case .debug: "debug: "
            case .notice, .info: ""
            }
            line = program + ": " + label + text + "\n"
        } else {
            line = "<\(priority.rawValue)>" + text + "\n"
        }
        writeAll(2, Array(line.utf8))
    }

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { buffer in
            var offset = 0
            while offset < buffer.count {
                let n = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                offset += n
            }
        }
    }

    /// The longest `MESSAGE` sent: a datagram must fit in one send, so longer ones are cut
    /// (journald's memfd path for large entries is not needed for lines this daemon writes).
    static let maximumMessage = 16 * 1024
    /// The longest value of any other field.
    static let maximumField = 1024

    /// The native protocol: `KEY=value\n`, or `KEY\n` + 64-bit little-endian length +
    /// value + `\n` when the value holds a newline.
    static func journalEntry(_ priority: Priority, _ program: String, _ text: String, _ event: Event?,
                             _ fields: KeyValuePairs<String, String>) -> [UInt8] {
        var entry: [UInt8] = []
        func add(_ key: String, _ value: String, limit: Int) {
            var bytes = Array(value.utf8)
            if bytes.count > limit { bytes.removeLast(bytes.count - limit) }
            entry += Array(key.utf8)
            if bytes.contains(UInt8(ascii: "\n")) {
                entry.append(UInt8(ascii: "\n"))
                withUnsafeBytes(of: UInt64(bytes.count).littleEndian) { entry += $0 }
            } else {
                entry.append(UInt8(ascii: "="))
            }
            entry += bytes
            entry.append(UInt8(ascii: "\n"))
        }
        add("PRIORITY", String(priority.rawValue), limit: maximumField)
        add("SYSLOG_FACILITY", "3", limit: maximumField)  // daemon
        add("SYSLOG_IDENTIFIER", program, limit: maximumField)
        if let event { add("MESSAGE_ID", event.id, limit: maximumField) }
        for (key, value) in fields { add(key, value, limit: maximumField) }
        add("MESSAGE", text, limit: maximumMessage)
        return entry
    }

    /// The journal's socket: `REACHABILITYD_JOURNAL_SOCKET`, else systemd's. Read once.
    private static let journalSocket =
        getenv(journalSocketVariable).map { String(cString: $0) } ?? "/run/systemd/journal/socket"

    private static func sendJournal(_ priority: Priority, _ program: String, _ text: String, _ event: Event?,
                                    _ fields: KeyValuePairs<String, String>) -> Bool {
        send(journalEntry(priority, program, text, event, fields), to: journalSocket)
    }

    /// A syslog line (RFC 3164's `<PRI>TAG[PID]: text`, facility daemon), as `/dev/log` and `/dev/kmsg` take it.
    private static func syslogLine(_ priority: Priority, _ program: String, _ text: String) -> String {
        "<\(3 * 8 + priority.rawValue)>\(program)[\(getpid())]: \(text)"
    }

    private static func sendSyslog(_ priority: Priority, _ program: String, _ text: String) -> Bool {
        send(Array(syslogLine(priority, program, text).utf8), to: "/dev/log")
    }

    private static func writeKmsg(_ priority: Priority, _ program: String, _ text: String) -> Bool {
        let fd = settings.withLock { state in
            if state.kmsg < 0 { state.kmsg = open("/dev/kmsg", O_WRONLY | O_CLOEXEC | O_NOCTTY) }
            return state.kmsg
        }
        guard fd >= 0 else { return false }
        writeAll(fd, Array((syslogLine(priority, program, text) + "\n").utf8))
        return true
    }

    /// One datagram to the socket at `path`, without blocking: a journal that cannot
    /// take it now loses the line rather than stopping the service's loop.
    private static func send(_ datagram: [UInt8], to path: String) -> Bool {
        let fd = settings.withLock { state in
            if state.socket < 0 {
                state.socket = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
                                      | Int32(SOCK_NONBLOCK.rawValue), 0)
            }
            return state.socket
        }
        guard fd >= 0 else { return false }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(path.utf8)
        guard pathBytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
            raw[pathBytes.count] = 0
        }
        let sent = datagram.withUnsafeBytes { bytes in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), $0,
                           socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
        }
        // EAGAIN: the journal is behind; the line is dropped, not written elsewhere.
        return sent >= 0 || errno == EAGAIN
    }
}
