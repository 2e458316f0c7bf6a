/// What people write where a host name or an address goes, and which names one
/// without being one: a URL (`https://example.com/path`) or a host and a port
/// (`example.com:443`, `[2001:db8::1]:443`). The daemon, the library and reachctl
/// recognise them here, and refuse them saying so and naming the host, instead of
/// "not an address literal". Reachability does not depend on a port or a path.
public enum HostInText: Equatable, Sendable {
    /// A URL; its host (empty when it has none: `file:///x`).
    case url(host: String)
    /// A host (or an address, without its brackets) and a port.
    case hostAndPort(host: String)

    /// The host named, without brackets.
    public var host: String {
        switch self {
        case .url(let host), .hostAndPort(let host): host
        }
    }

    /// `text` as a URL or a host and a port; `nil` for anything else (host names and
    /// address literals included: an IPv6 literal has more than one colon).
    public static func recognise(_ text: String) -> HostInText? {
        if let host = urlHost(text) { return .url(host: host) }
        if let host = hostOfHostPort(text[...]) { return .hostAndPort(host: host) }
        return nil
    }

    /// The refusal, for `text` as the caller wrote it: what it is, and the host to ask about.
    public func message(for text: String) -> String {
        let quoted = InvalidTarget.quoted(text)
        switch self {
        case .url(let host):
            return "\(quoted) is a URL, not a host name or an address"
                + (host.isEmpty ? " (it names no host)" : ": its host is \(InvalidTarget.quoted(host))")
        case .hostAndPort(let host):
            return "\(quoted) is a host and a port, not a host name or an address (reachability does not "
                + "depend on the port): the host is \(InvalidTarget.quoted(host))"
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
        if let host = hostOfHostPort(authority) { return host }
        return String(authority.hasPrefix("[") ? authority.dropFirst().prefix { $0 != "]" } : authority)
    }

    /// `host` of `host:port` or `[address]:port`; `nil` for anything else.
    static func hostOfHostPort(_ text: Substring) -> String? {
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
}
