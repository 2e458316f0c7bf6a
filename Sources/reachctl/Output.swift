import FoundationEssentials
import Glibc
import Reachability
import Synchronization

/// What reachctl prints, and how: lines written straight to the descriptors,
/// so that `watch` reaches a pipe line by line. FoundationEssentials only
/// (dates and JSON): Foundation would bring its internationalisation data,
/// 45 MB of a statically linked reachctl.
enum Output {
    static let standardOutput: Int32 = 1
    static let standardError: Int32 = 2

    static func line(_ text: String, to descriptor: Int32 = standardOutput) {
        var bytes = Array((text + "\n").utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            if written <= 0 { return }
            bytes = bytes.dropFirst(written)
        }
    }

    static func error(_ message: String) { line("reachctl: " + message, to: standardError) }

    private static let notedInProcess = Atomic<Bool>(false)

    /// Says once, on standard error, that the answers are computed in this process.
    static func noteInProcess(forced: Bool) {
        guard !notedInProcess.exchange(true, ordering: .relaxed) else { return }
        let why = forced ? "--no-daemon" : "no reachabilityd on the system bus"
        line("reachctl: \(why); evaluating in this process", to: standardError)
    }

    static func state(_ state: ReachabilityState, of manager: NetworkReachabilityManager, json: Bool, time: Date?) {
        self.state(state, of: manager.target, mode: manager.mode, json: json, time: time)
    }

    static func state(_ state: ReachabilityState, of target: ReachabilityTarget, mode: ReachabilityMode,
                      json: Bool, time: Date?) {
        if json {
            line(Record(state, target: target, mode: mode, time: time).json)
        } else if let time {
            line("\(timestamp(time)) \(target): \(words(state)) status=\(state.status.rawValue)"
                 + " interface=\(state.interface.isEmpty ? "-" : state.interface)"
                 + " type=\(state.interfaceType.rawValue.isEmpty ? "-" : state.interfaceType.rawValue)"
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
        if !state.error.isEmpty { rows.append(("Error", state.error)) }
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

    static func timestamp(_ date: Date) -> String {
        date.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
    }

    /// One JSON object per target (and per change).
    struct Record: Encodable {
        var time: String?
        var target: String
        var kind: String
        var mode: String
        var flags: UInt32?
        var flagNames: [String]
        var status: Int32
        var reachable: Bool
        var interface: String
        var interfaceType: String
        var connectivity: String
        var metered: Bool
        var vpn: Bool
        var reachableIPv4: Bool
        var reachableIPv6: Bool
        var addresses: [String]
        var error: String

        enum CodingKeys: String, CodingKey {
            case time, target, kind, mode, flags, status, reachable, interface, connectivity, metered, vpn
            case addresses, error
            case flagNames = "flag_names"
            case interfaceType = "interface_type"
            case reachableIPv4 = "reachable_ipv4"
            case reachableIPv6 = "reachable_ipv6"
        }

        init(_ state: ReachabilityState, target: ReachabilityTarget, mode: ReachabilityMode, time: Date?) {
            self.time = time.map(Output.timestamp)
            self.target = target.description
            kind = switch target {
            case .internet: "internet"
            case .host: "host"
            case .address: "address"
            }
            self.mode = mode.rawValue
            flags = state.flags?.rawValue
            flagNames = ReachabilityFlags.named.filter { state.flags?.contains($0.flag) == true }.map(\.name)
            status = state.status.rawValue
            reachable = state.isReachable
            interface = state.interface
            interfaceType = state.interfaceType.rawValue
            connectivity = state.connectivity.rawValue
            metered = state.isMetered
            vpn = state.isVPN
            reachableIPv4 = state.reachableIPv4
            reachableIPv6 = state.reachableIPv6
            addresses = state.addresses
            error = state.error
        }

        var json: String {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return String(decoding: (try? encoder.encode(self)) ?? Data("{}".utf8), as: UTF8.self)
        }
    }
}
