import ReachabilityCore

/// What a caller asked to watch, validated and normalised: a host name (normalised ASCII),
/// an address literal (the unspecified address: the internet), or an address pair. The
/// daemon and the client library parse with these functions, so both accept and reject the
/// same input with the same messages.
public typealias TargetInput = TargetDescription<IPAddress>

extension TargetDescription where Address == IPAddress {
    /// Parses `WatchAddressPair`'s arguments: each an address literal or empty, not both
    /// empty, both of one family.
    public static func parsePair(local: String, remote: String) throws(InvalidTarget) -> TargetInput {
        func parse(_ text: String, side: String) throws(InvalidTarget) -> IPAddress? {
            guard !text.isEmpty else { return nil }
            do {
                return try parseLiteral(text)
            } catch {
                throw InvalidTarget(message: "\(side) address: \(error.message)")
            }
        }
        let localAddress = try parse(local, side: "local")
        let remoteAddress = try parse(remote, side: "remote")
        guard localAddress != nil || remoteAddress != nil else {
            throw InvalidTarget(message: "an address pair needs a local or a remote address (both are empty)")
        }
        if let localAddress, let remoteAddress, localAddress.family != remoteAddress.family {
            throw InvalidTarget(
                message: "local address \(quoted(local)) and remote address \(quoted(remote)) are not of one family "
                    + "(a packet from one cannot go to the other)")
        }
        return .pair(local: localAddress, remote: remoteAddress)
    }

    /// Input the C libraries would read only up to a NUL (inet_pton, IDN conversion)
    /// must not get there: "192.0.2.1\0x" is not 192.0.2.1. (D-Bus strings cannot
    /// hold a NUL; the client library's can.)
    private static func checkNoNUL(_ text: String, _ what: String) throws(InvalidTarget) {
        if text.utf8.contains(0) { throw InvalidTarget(message: "\(what) \(quoted(text)) contains a NUL character") }
    }

    /// Parses `text` as `WatchAddress` does: an IPv4 or IPv6 literal, IPv6 with an optional
    /// scope. The unspecified address is Apple's internet target
    /// (`reachabilityForInternetConnection` creates it with 0.0.0.0): the internet, held as that
    /// address.
    public static func parseAddress(_ text: String) throws(InvalidTarget) -> TargetInput {
        let address = try parseLiteral(text)
        return AddressText.isUnspecified(address.description) ? .internet(address) : .address(address)
    }

    /// An address literal as `parseAddress` reads it.
    static func parseLiteral(_ text: String) throws(InvalidTarget) -> IPAddress {
        guard text.utf8.count <= TargetName.maximumInputLength else {
            throw InvalidTarget(
                message: "address is \(text.utf8.count) bytes long; at most \(TargetName.maximumInputLength) are accepted")
        }
        try checkNoNUL(text, "address")
        do {
            let address = try IPAddress(parsing: text)
            // An IPv4-mapped IPv6 address is that IPv4 address to a socket (a dual-stack socket
            // connects over IPv4): one target, answered as IPv4.
            if address.family == .ipv6, address.scopeIndex == 0, address.bytes[0..<10].allSatisfy({ $0 == 0 }),
               address.bytes[10] == 0xFF, address.bytes[11] == 0xFF,
               let mapped = try? IPAddress(parsing: address.bytes[12...].map(String.init).joined(separator: ".")) {
                return mapped
            }
            return address
        } catch .unknownScope(let scope) {
            throw InvalidTarget(message: "address \(quoted(text)): no interface \(quoted(scope)) for the scope")
        } catch {
            // "https://example.com/", "example.com:443": named, with the host to ask about.
            if let named = HostInText.recognise(text) { throw InvalidTarget(message: named.message(for: text)) }
            // "1.2.3", "0x7f.1": an address in a URL, but only dotted quads are literals here.
            if let address = TargetName.whatwgIPv4(text) {
                throw InvalidTarget(
                    message: "\(quoted(text)) is not an IPv4 or IPv6 address literal "
                        + "(not in canonical dotted-quad form: write it as \(address))")
            }
            throw InvalidTarget(message: "\(quoted(text)) is not an IPv4 or IPv6 address literal")
        }
    }

    /// Parses `text` as `WatchHost` does: an address literal is watched as that
    /// address (as Apple does); a name is converted from IDN and validated.
    public static func parseHost(_ text: String) throws(InvalidTarget) -> TargetInput {
        guard text.utf8.count <= TargetName.maximumInputLength else {
            throw InvalidTarget(
                message: "host name is \(text.utf8.count) bytes long; at most \(TargetName.maximumInputLength) are accepted")
        }
        try checkNoNUL(text, "host name")
        if TargetName.looksLikeAddressLiteral(text), (try? IPAddress(parsing: text)) != nil {
            return try parseAddress(text)
        }
        if text.utf8.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: ":") }) {
            // Meant as an address literal (a scope or a colon can only be that).
            return try parseAddress(text)
        }
        var ascii = text
        if !text.utf8.allSatisfy({ $0 < 0x80 }) {
            guard let converted = HostNameEncoding.ascii(text) else {
                throw InvalidTarget(message: "host name \(quoted(text)) cannot be converted to ASCII (IDNA)")
            }
            ascii = converted
        }
        let name = try TargetName.normalizeHost(ascii)
        // "192.0.2.1." is that address once its root dot is gone: one target, not two.
        if TargetName.looksLikeAddressLiteral(name), (try? IPAddress(parsing: name)) != nil {
            return try parseAddress(name)
        }
        return .host(name)
    }

    public static func quoted(_ text: String) -> String { InvalidTarget.quoted(text) }
}
