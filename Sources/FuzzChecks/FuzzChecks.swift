import ReachabilityBus
import ReachabilityCore
import ReachabilityPlatform

/// The properties the fuzz targets check, one function per target, each
/// taking raw bytes. The libFuzzer entry points and the regression tests that
/// replay every saved input call exactly these. A violated property traps.
public enum FuzzChecks {
    public static let targets: [String: @Sendable ([UInt8]) -> Void] = [
        "names": names, "paths": paths, "messages": messages,
    ]

    /// Host names and address literals, as `WatchHost`/`WatchAddress`/`WatchAddressPair` parse them:
    /// never a crash; what is accepted is normalised, and stays itself when parsed again.
    public static func names(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        if let parsed = try? TargetInput.parseHost(text) {
            switch parsed {
            case .host(let name):
                precondition(name.utf8.count <= TargetName.maximumNameLength + (name.hasSuffix(".") ? 1 : 0), "too long: \(name)")
                precondition(name.utf8.allSatisfy { $0 < 0x80 }, "not ASCII: \(name)")
                precondition((try? TargetName.normalizeHost(name)) == name, "not idempotent: \(name)")
                precondition((try? TargetInput.parseHost(name)) == parsed, "parses differently again: \(name)")
            case .address(let address), .internet(let address?):
                precondition((try? TargetInput.parseAddress(address.description)) == parsed,
                             "canonical literal does not parse back: \(address)")
            case .internet(nil):
                preconditionFailure("parseHost gave the root's internet: \(text)")
            case .pair:
                preconditionFailure("parseHost gave an address pair: \(text)")
            }
        }
        // `WatchAddressPair`'s two arguments, split at the first comma: its name parses back to it.
        if let comma = text.firstIndex(of: ","),
            let pair = try? TargetInput.parsePair(local: String(text[..<comma]), remote: String(text[text.index(after: comma)...]))
        {
            let parts = pair.name.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            precondition(parts.count == 2 && (try? TargetInput.parsePair(local: parts[0], remote: parts[1])) == pair,
                         "address pair round trip: \(text)")
        }
        if let address = try? TargetInput.parseAddress(text) {
            precondition((try? TargetInput.parseAddress(address.name)) == address, "address round trip: \(text)")
        }
    }

    /// Path escaping: a valid object path element that unescapes to the input.
    public static func paths(_ bytes: [UInt8]) {
        let label = String(decoding: bytes, as: UTF8.self)
        let escaped = PathEscaping.escapeLabel(label)
        precondition(ObjectPath(rawValue: "/" + escaped) != nil, "invalid element \(escaped) for \(label)")
        precondition(PathEscaping.unescapeLabel(escaped) == label, "round trip of \(label)")
    }

    /// A marshalled message from a peer: validated by libdbus, decoded into
    /// values whose signature is the message's, and encoded back to the same
    /// bytes. (Bytes, not values, are compared: a NaN double is not equal to itself.)
    public static func messages(_ bytes: [UInt8]) {
        guard let (signature, values) = MarshalledMessage.decodeBody(bytes) else { return }
        precondition(values.signature == signature, "decoded \(values.signature), message says \(signature)")
        guard let encoded = MarshalledMessage.methodCall(member: "Query", values) else {
            preconditionFailure("values decoded from \(signature) do not encode again")
        }
        let decoded = MarshalledMessage.decodeBody(encoded)
        precondition(decoded?.signature == signature, "re-encoded \(signature) body decodes differently")
        let again = decoded.flatMap { MarshalledMessage.methodCall(member: "Query", $0.values) }
        precondition(again == encoded, "round trip of a \(signature) body")
    }

    /// Seed inputs for the message target: bodies of every method's signature and a few more.
    public static var messageSeeds: [[UInt8]] {
        let bodies: [(String, [DBusValue])] = [
            ("WatchHost", [.string("example.com")]),
            ("WatchAddress", [.string("2001:db8::1%lo")]),
            ("WatchAddressPair", [.string("192.0.2.10"), .string("198.51.100.7")]),
            ("Release", [.objectPath(ObjectPath("/io/github/reachabilityd/Reachability1/host/example_2ecom"))]),
            ("Query", [.string("")]),
            ("Set", [.string("io.github.reachabilityd.Reachability1.Target"), .string("Flags"), .variant(.uint32(2))]),
            ("Odd", [.vardict([("a", .strings(["x", "y"])), ("b", .structure([.int64(-1), .double(0.5)]))]),
                     .array(elementSignature: "y", [.byte(0), .byte(255)]), .variant(.variant(.boolean(true)))]),
        ]
        return bodies.compactMap { MarshalledMessage.methodCall(member: $0.0, $0.1) }
    }
}
