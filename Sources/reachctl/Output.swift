import Glibc
import ReachabilitydClientCore
import Synchronization

/// What reachctl prints, and how: lines written straight to the descriptors,
/// so that `watch` reaches a pipe line by line. No Foundation: its
/// internationalisation data alone made a statically linked reachctl 73 MB.
enum Output {
    /// Writes `text` and a newline to `fd` with write(2), whole. A reader that
    /// went away (`reachctl … | head -1`) ends the program the way it ends
    /// coreutils: silently, by SIGPIPE. Any other failure to write to standard
    /// output ends it with status 2 and one line on standard error.
    static func line(_ text: String, to fd: Int32 = STDOUT_FILENO) {
        var bytes = Array((text + "\n").utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if written >= 0 {
                bytes = bytes.dropFirst(written)
                continue
            }
            let error = errno
            if error == EINTR { continue }
            if error == EPIPE {
                signal(SIGPIPE, SIG_DFL)
                raise(SIGPIPE)
            }
            guard fd != STDERR_FILENO else { exit(2) }
            line("reachctl: cannot write to standard output: \(String(cString: strerror(error)))", to: STDERR_FILENO)
            exit(2)
        }
    }

    static func error(_ message: String) { line("reachctl: " + message, to: STDERR_FILENO) }

    private static let notedInProcess = Atomic<Bool>(false)

    /// `-q`: the note on in-process answers is not said either.
    static func silenceNotes() { notedInProcess.store(true, ordering: .relaxed) }

    /// Says once, on standard error, that the answers are computed in this process.
    static func noteInProcess(forced: Bool) {
        guard !notedInProcess.exchange(true, ordering: .relaxed) else { return }
        let why = forced ? "--no-daemon" : ReachabilityMode.inProcessReason ?? "no reachabilityd on the system bus"
        line("reachctl: \(why); evaluating in this process", to: STDERR_FILENO)
    }

    static func state(_ state: ReachabilityState, of manager: NetworkReachabilityManager, json: Bool, time: timespec?) {
        self.state(state, of: manager.target, mode: manager.mode, json: json, time: time)
    }

    static func state(_ state: ReachabilityState, of target: ReachabilityTarget, mode: ReachabilityMode,
                      json: Bool, time: timespec?) {
        if json {
            line(Record(state, target: target, mode: mode, time: time).json)
        } else if let time {
            line("\(timestamp(time)) \(target): \(words(state)) status=\(state.status.rawValue)"
                 + " interface=\(state.interface.isEmpty ? "-" : state.interface)"
                 + " type=\(state.interfaceType.rawValue.isEmpty ? "-" : state.interfaceType.rawValue)"
                 + (state.reason.map { " reason=\($0.rawValue)" } ?? "")
                 + (state.error.isEmpty ? "" : " error=\(quoted(state.error))"))
        } else {
            line(block(state, target: target))
        }
    }

    /// The flags in words, as `scutil -r` prints them, or "Unknown".
    static func words(_ state: ReachabilityState) -> String {
        state.flags?.description ?? "Unknown"
    }

    static func block(_ state: ReachabilityState, target: ReachabilityTarget) -> String {
        func yes(_ b: Bool) -> String { b ? "yes" : "no" }
        let flags = state.flags.map { hex($0.rawValue) } ?? "unknown"
        var rows = [
            ("Reachability", "\(words(state)) (\(flags))"),
            ("Status", "\(state.status.rawValue) (\(describe(state.reachabilityStatus)))"),
            ("Interface", state.interface.isEmpty ? "none" : "\(state.interface) (\(state.interfaceType.rawValue))"),
            ("Connectivity", state.connectivity.rawValue),
            ("Metered", yes(state.isMetered)),
            ("VPN", yes(state.isVPN)),
            ("IPv4", state.reachableIPv4 ? "reachable" : "not reachable"),
            ("IPv6", state.reachableIPv6 ? "reachable" : "not reachable"),
        ]
        if !state.addresses.isEmpty { rows.append(("Addresses", state.addresses.joined(separator: ", "))) }
        // The reason in words (the sentence), with its stable word; a sentence without one stays "Error".
        if let reason = state.reason {
            rows.append(("Reason", state.error.isEmpty ? reason.rawValue : "\(state.error) (\(reason.rawValue))"))
        } else if !state.error.isEmpty {
            rows.append(("Error", state.error))
        }
        return "\(target)\n" + rows.map { "  \($0.0 + ":")\(String(repeating: " ", count: 14 - $0.0.count))\($0.1)" }
            .joined(separator: "\n")
    }

    /// `0x00000002`, as `scutil -r` shows flags.
    static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return "0x" + String(repeating: "0", count: max(0, 8 - digits.count)) + digits
    }

    /// `text` in double quotes, with quotes and backslashes escaped.
    static func quoted(_ text: String) -> String {
        "\"" + text.replacing("\\", with: "\\\\").replacing("\"", with: "\\\"") + "\""
    }

    static func describe(_ status: NetworkReachabilityManager.NetworkReachabilityStatus) -> String {
        switch status {
        case .unknown: "unknown"
        case .notReachable: "not reachable"
        case .reachable(.ethernetOrWiFi): "reachable via Ethernet or Wi-Fi"
        case .reachable(.cellular): "reachable via cellular"
        }
    }

    /// `2026-11-23T12:20:45.117Z`: ISO 8601, UTC, milliseconds.
    static func timestamp(_ time: timespec) -> String {
        var seconds = time.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func padded(_ value: Int, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(padded(Int(parts.tm_year) + 1900, 4))-\(padded(Int(parts.tm_mon) + 1, 2))-\(padded(Int(parts.tm_mday), 2))"
            + "T\(padded(Int(parts.tm_hour), 2)):\(padded(Int(parts.tm_min), 2)):\(padded(Int(parts.tm_sec), 2))"
            + ".\(padded(time.tv_nsec / 1_000_000, 3))Z"
    }

    /// The time now, for `watch` lines.
    static func now() -> timespec {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return time
    }

    /// One JSON object per target (and per change): keys sorted, absent values left out,
    /// except `flags`, which every record has (`null` while the state is unknown), so
    /// that a consumer never has to tell "unknown" from "missing".
    struct Record {
        var fields: [(String, JSON)] = []

        /// `holders`: the connections holding the target (root's `list`), or `nil`.
        init(_ state: ReachabilityState, target: ReachabilityTarget, mode: ReachabilityMode, time: timespec?,
             holders: [ReachabilityHolder]? = nil) {
            let kind = switch target {
            case .internet: "internet"
            case .host: "host"
            case .address: "address"
            case .addressPair: "pair"
            }
            let names = ReachabilityFlags.named.filter { state.flags?.contains($0.flag) == true }.map(\.name)
            let all: [(String, JSON?)] = [
                ("addresses", .strings(state.addresses)),
                ("connectivity", .string(state.connectivity.rawValue)),
                ("error", .string(state.error)),
                ("flag_names", .strings(names)),
                ("flags", state.flags.map { .number(Int64($0.rawValue)) } ?? .null),
                ("holders", holders.map { list in
                    .objects(list.map { [("client", .string($0.client)), ("uid", .number(Int64($0.user)))] })
                }),
                ("interface", .string(state.interface)),
                ("interface_type", .string(state.interfaceType.rawValue)),
                ("kind", .string(kind)),
                ("metered", .bool(state.isMetered)),
                ("mode", .string(mode.rawValue)),
                ("reachable", .bool(state.isReachable)),
                ("reachable_ipv4", .bool(state.reachableIPv4)),
                ("reachable_ipv6", .bool(state.reachableIPv6)),
                ("reason", .string(state.reason?.rawValue ?? "")),
                ("status", .number(Int64(state.status.rawValue))),
                ("target", .string(target.description)),
                ("time", time.map { .string(Output.timestamp($0)) }),
                ("vpn", .bool(state.isVPN)),
            ]
            fields = all.compactMap { key, value in value.map { (key, $0) } }
        }

        var json: String {
            "{" + fields.map { JSON.quote($0.0) + ":" + $0.1.text }.joined(separator: ",") + "}"
        }
    }

    /// The few JSON values a record holds.
    enum JSON {
        case string(String)
        case strings([String])
        case number(Int64)
        case bool(Bool)
        case null
        /// Objects of a few fields each, in the order given.
        indirect case objects([[(String, JSON)]])

        var text: String {
            switch self {
            case .objects(let objects):
                "[" + objects.map { "{" + $0.map { Self.quote($0.0) + ":" + $0.1.text }.joined(separator: ",") + "}" }
                    .joined(separator: ",") + "]"
            case .null: "null"
            case .string(let value): Self.quote(value)
            case .strings(let values): "[" + values.map(Self.quote).joined(separator: ",") + "]"
            case .number(let value): String(value)
            case .bool(let value): value ? "true" : "false"
            }
        }

        /// A JSON string: quotes, backslashes and control characters escaped; the rest as UTF-8.
        static func quote(_ text: String) -> String {
            var result = "\""
            for scalar in text.unicodeScalars {
                switch scalar {
                case "\"": result += "\\\""
                case "\\": result += "\\\\"
                case "\n": result += "\\n"
                case "\r": result += "\\r"
                case "\t": result += "\\t"
                case _ where scalar.value < 0x20:
                    let hex = String(scalar.value, radix: 16)
                    result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                default: result.unicodeScalars.append(scalar)
                }
            }
            return result + "\""
        }
    }
}
