import Reachability

/// What people type where a TARGET goes, beyond host names and addresses, and
/// the sentences reachctl answers with.
enum TargetText {
    /// Refuses a URL or a `host:port` with a message that says so and names the
    /// host to ask about; anything else is left to the library's validation.
    static func check(_ text: String, command: String) throws(ReachabilityError) {
        if let host = urlHost(text) {
            throw .invalidTarget("\"\(text)\" is a URL; a TARGET is a host name or an address"
                                 + (host.isEmpty ? "" : ": for its host, reachctl \(command) \(host)"))
        }
        if let host = hostOfHostPort(text) {
            throw .invalidTarget("\"\(text)\" is a host and a port; a TARGET is a host name or an address"
                                 + " (reachability does not depend on the port): reachctl \(command) \(host)")
        }
    }

    /// The host of `scheme://[user@]host[:port][/…]` ("" if it has none); `nil` when `text` is not a URL.
    static func urlHost(_ text: String) -> String? {
        guard let separator = text.firstRange(of: "://") else { return nil }
        let scheme = text[..<separator.lowerBound]
        guard let first = scheme.first, first.isASCII, first.isLetter,
            scheme.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "+-.".contains($0)) })
        else { return nil }
        var authority = text[separator.upperBound...].prefix { !"/?#".contains($0) }
        if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
        if let host = hostOfHostPort(String(authority)) { return host }
        return String(authority.hasPrefix("[") ? authority.dropFirst().prefix { $0 != "]" } : authority)
    }

    /// `host` of `host:port` or `[address]:port`; `nil` for anything else (IPv6
    /// literals have more than one colon).
    static func hostOfHostPort(_ text: String) -> String? {
        if text.hasPrefix("["), let close = text.firstIndex(of: "]") {
            let rest = text[text.index(after: close)...]
            guard rest.first == ":", isPort(rest.dropFirst()) else { return nil }
            return String(text[text.index(after: text.startIndex)..<close])
        }
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, isPort(parts[1]) else { return nil }
        return String(parts[0])
    }

    static func isPort(_ text: Substring) -> Bool {
        !text.isEmpty && text.count <= 5 && text.allSatisfy { $0.isASCII && $0.isNumber }
    }

    /// A "no daemon" error as a sentence: no system bus at all, or a bus that
    /// cannot start reachabilityd; `hint` says what it means for the command.
    static func explained(_ error: ReachabilityError, hint: String? = nil) -> ReachabilityError {
        let hint = hint.map { "; " + $0 } ?? ""
        if case .failed(let message) = error, message.hasPrefix("org.freedesktop.DBus.Error.AccessDenied") {
            return .serviceUnavailable("the system bus refused the call to reachabilityd: its policy is not"
                                       + " installed or not loaded (reachctl doctor says why)" + hint)
        }
        guard case .serviceUnavailable(let message) = error else { return error }
        let noBus = "cannot connect to the system bus: "
        if message.hasPrefix(noBus) {
            return .serviceUnavailable("reachabilityd cannot be asked: there is no system bus ("
                                       + message.dropFirst(noBus.count) + ")" + hint)
        }
        if let noAnswer = message.firstRange(of: " did not answer: ") {
            return .serviceUnavailable("reachabilityd did not answer (" + message[noAnswer.upperBound...] + ")" + hint)
        }
        return .serviceUnavailable("reachabilityd is not running, and the system bus cannot start it"
                                   + " (reachctl doctor says why)" + hint)
    }
}
