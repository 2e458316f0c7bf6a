import ReachabilityBus
import ReachabilityCore
import ReachabilityPlatform

/// What a caller asked to watch, validated and normalised: one host has one key.
struct TargetKey: Hashable, Sendable {
    let kind: TargetKind
    let name: String

    /// The deterministic object path: `…/host/<escaped>` or `…/address/<escaped>`.
    var path: ObjectPath {
        Names.rootPath.appending(kind.rawValue)!.appending(PathEscaping.escapeLabel(name))!
    }
}

/// A parsed target: a host name (normalised ASCII) or an address literal.
enum TargetInput: Hashable, Sendable {
    case host(String)
    case address(IPAddress)

    var key: TargetKey {
        switch self {
        case .host(let name): TargetKey(kind: .host, name: name)
        case .address(let address): TargetKey(kind: .address, name: address.description)
        }
    }

    /// Parses `text` as `WatchAddress` does: an IPv4 or IPv6 literal, IPv6 with an optional scope.
    static func parseAddress(_ text: String) throws(BusError) -> TargetInput {
        guard text.utf8.count <= TargetName.maximumInputLength else {
            throw ServiceError.invalidTarget(
                "address is \(text.utf8.count) bytes long; at most \(TargetName.maximumInputLength) are accepted")
        }
        do {
            return .address(try IPAddress(parsing: text))
        } catch .unknownScope(let scope) {
            throw ServiceError.invalidTarget(
                "address \(quoted(text)): no interface \(quoted(scope)) for the scope")
        } catch {
            throw ServiceError.invalidTarget("\(quoted(text)) is not an IPv4 or IPv6 address literal")
        }
    }

    /// Parses `text` as `WatchHost` does: an address literal is watched as that
    /// address (as Apple does); a name is converted from IDN and validated.
    static func parseHost(_ text: String) throws(BusError) -> TargetInput {
        guard text.utf8.count <= TargetName.maximumInputLength else {
            throw ServiceError.invalidTarget(
                "host name is \(text.utf8.count) bytes long; at most \(TargetName.maximumInputLength) are accepted")
        }
        if TargetName.looksLikeAddressLiteral(text), let address = try? IPAddress(parsing: text) {
            return .address(address)
        }
        if text.contains("%") || (text.contains(":") && !text.isEmpty) {
            // Meant as an address literal (a scope or a colon can only be that).
            return try parseAddress(text)
        }
        var ascii = text
        if !text.utf8.allSatisfy({ $0 < 0x80 }) {
            guard let converted = HostNameEncoding.ascii(text) else {
                throw ServiceError.invalidTarget("host name \(quoted(text)) cannot be converted to ASCII (IDNA)")
            }
            ascii = converted
        }
        do {
            return .host(try TargetName.normalizeHost(ascii))
        } catch {
            throw ServiceError.invalidTarget(error.message)
        }
    }

    static func quoted(_ text: String) -> String { InvalidTarget.quoted(text) }
}
