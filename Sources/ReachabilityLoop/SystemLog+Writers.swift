#if canImport(Glibc)
import Glibc
#endif

/// The writers: the journal's native protocol, `<N>` lines or plain text on standard
/// error, `/dev/kmsg`, `/dev/log`.
extension SystemLog {
    /// The journal when `JOURNAL_STREAM` ("DEVICE:INODE") is standard error's, as
    /// systemd.exec(5) asks a service to check; otherwise the console. Read once.
    public static let environmentTarget: Log.Target = {
        guard let value = getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else { return .console }
        let parts = value.split(separator: ":")
        var status = stat()
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]),
              fstat(2, &status) == 0 else { return .console }
        return UInt64(status.st_dev) == device && UInt64(status.st_ino) == inode ? .journal : .console
    }()

    private static let standardErrorIsTerminal = isatty(2) == 1

    func writeConsole(_ priority: Log.Priority, _ text: String) {
        let line: String
        if Self.standardErrorIsTerminal {
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
        Self.writeAll(2, Array(line.utf8))
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
    static func journalEntry(_ priority: Log.Priority, _ program: String, _ text: String, messageID: String?,
                             fields: [(String, String)]) -> [UInt8] {
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
        if let messageID { add("MESSAGE_ID", messageID, limit: maximumField) }
        for (key, value) in fields { add(key, value, limit: maximumField) }
        add("MESSAGE", text, limit: maximumMessage)
        return entry
    }

    /// The journal's socket: `REACHABILITYD_JOURNAL_SOCKET`, else systemd's. Read once.
    private static let journalSocket =
        getenv(Log.journalSocketVariable).map { String(cString: $0) } ?? "/run/systemd/journal/socket"

    func sendJournal(_ priority: Log.Priority, _ text: String, _ messageID: String?,
                     _ fields: [(String, String)]) -> Bool {
        send(Self.journalEntry(priority, program, text, messageID: messageID, fields: fields), to: Self.journalSocket)
    }

    /// A syslog line (RFC 3164's `<PRI>TAG[PID]: text`, facility daemon), as `/dev/log` and `/dev/kmsg` take it.
    private func syslogLine(_ priority: Log.Priority, _ text: String) -> String {
        "<\(3 * 8 + priority.rawValue)>\(program)[\(getpid())]: \(text)"
    }

    func sendSyslog(_ priority: Log.Priority, _ text: String) -> Bool {
        send(Array(syslogLine(priority, text).utf8), to: "/dev/log")
    }

    func writeKmsg(_ priority: Log.Priority, _ text: String) -> Bool {
        let fd = kmsgDescriptor()
        guard fd >= 0 else { return false }
        Self.writeAll(fd, Array((syslogLine(priority, text) + "\n").utf8))
        return true
    }

    /// One datagram to the socket at `path`, without blocking: a journal that cannot
    /// take it now loses the line rather than stopping the service's loop.
    private func send(_ datagram: [UInt8], to path: String) -> Bool {
        let fd = datagramSocket()
        guard fd >= 0 else { return false }
        let sent = UnixDatagram.send(datagram, to: path, over: fd)
        // EAGAIN: the journal is behind; the line is dropped, not written elsewhere.
        return sent == 0 || sent == EAGAIN
    }
}

/// Datagrams to a local socket named by its path (the journal's, `/dev/log`, the service
/// manager's `NOTIFY_SOCKET`), the one place that builds its address.
enum UnixDatagram {
    /// A non-blocking, close-on-exec datagram socket of `AF_UNIX` (-1 when none can be had).
    /// Wraps `socket(2)`.
    static func openSocket() -> Int32 {
        socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
    }

    /// Sends `datagram` over `fd` (a datagram socket of `AF_UNIX`) to `path`; a path that
    /// starts with `@` names an abstract socket (systemd's notation). Returns 0 when sent,
    /// else the error number (`EINVAL` for a path too long). Wraps `sendto(2)`.
    static func send(_ datagram: [UInt8], to path: String, over fd: Int32) -> Int32 {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(path.utf8)
        let abstract = pathBytes.first == UInt8(ascii: "@")
        if abstract { pathBytes[0] = 0 }
        guard !pathBytes.isEmpty, pathBytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return EINVAL }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: pathBytes)
            raw[pathBytes.count] = 0
        }
        // An abstract name is exactly its bytes; a path is NUL-terminated.
        let length = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + pathBytes.count + (abstract ? 0 : 1)
        let sent = datagram.withUnsafeBytes { bytes in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL), $0, socklen_t(length))
                }
            }
        }
        return sent >= 0 ? 0 : errno
    }
}
