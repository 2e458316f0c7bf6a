import Logging

/// The project's log vocabulary. Every module logs through a swift-log `Logger` it is
/// given (an init parameter, kept as a stored property): nothing logs through a global.
/// The process chooses where records go once, in its `main`: the daemon hands
/// everything a ``SystemLog``'s logger (the journal, `<N>` prefixes, a terminal); the
/// client library hands it the application's logger.
///
/// A record an administrator looks for carries an ``Event`` and fields as metadata
/// (`metadata: .event(.internetChanged, ["reason": …])`); ``SystemLogHandler`` turns
/// them back into the journal's `MESSAGE_ID` and `REACH_…` fields.
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

        /// The priority a swift-log level is written with (`trace` as `debug`, `critical` as `crit`).
        public init(_ level: Logger.Level) {
            self = switch level {
            case .trace, .debug: .debug
            case .info: .info
            case .notice: .notice
            case .warning: .warning
            case .error: .err
            case .critical: .crit
            }
        }

        /// The swift-log level of this priority (`emerg`, `alert` and `crit` are `critical`).
        public var level: Logger.Level {
            switch self {
            case .emerg, .alert, .crit: .critical
            case .err: .error
            case .warning: .warning
            case .notice: .notice
            case .info: .info
            case .debug: .debug
            }
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
    /// The ids are listed in docs/logs.md; they never change.
    public struct Event: Sendable, Hashable {
        public let id: String
        public init(id: String) { self.id = id }

        /// The metadata key an event's id travels under in swift-log (`message.id`); the
        /// journal writes it as `MESSAGE_ID`.
        public static let metadataKey = "message.id"

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

    /// The environment variable that points the journal's socket elsewhere (tests,
    /// containers); unset, `/run/systemd/journal/socket`.
    public static let journalSocketVariable = "REACHABILITYD_JOURNAL_SOCKET"

    /// The journal field a metadata key is written as: `backend.mode` → `REACH_BACKEND_MODE`
    /// (upper case; anything but a letter or digit becomes `_`, as journald requires).
    public static func journalField(_ key: String) -> String {
        var field = Array("REACH_".utf8)
        field.reserveCapacity(6 + key.utf8.count)
        for byte in key.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"): field.append(byte - 32)
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): field.append(byte)
            default: field.append(UInt8(ascii: "_"))
            }
        }
        return String(decoding: field, as: UTF8.self)
    }
}

extension Logger.Metadata {
    /// An event's metadata: its id (``Log/Event/metadataKey``) and its fields, under dotted
    /// keys (`["backend.mode": "auto"]` is the journal's `REACH_BACKEND_MODE=auto`).
    public static func event(_ event: Log.Event, _ fields: Logger.Metadata = [:]) -> Logger.Metadata {
        var metadata = fields
        metadata[Log.Event.metadataKey] = .string(event.id)
        return metadata
    }
}
