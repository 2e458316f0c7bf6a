/// Why an input is not a valid target; the message names the label, the
/// character and the limit, and is safe to send on D-Bus.
public struct InvalidTarget: Error, Hashable, Sendable {
    public let message: String
    public init(_ message: String) { self.message = message }
}

/// Host-name validation and normalisation, as the specification says.
public enum TargetName {
    /// Longer raw inputs are refused before any other work.
    public static let maximumInputLength = 1024
    public static let maximumNameLength = 253
    public static let maximumLabelLength = 63

    /// Validates an ASCII host name (IDN already converted by the caller) and
    /// returns its normal form: lower-case, without the trailing dot.
    public static func normalizeHost(_ name: String) throws(InvalidTarget) -> String {
        let bytes = Array(name.utf8)
        guard bytes.count <= maximumInputLength else {
            throw InvalidTarget("host name is \(bytes.count) bytes long; at most \(maximumInputLength) are accepted")
        }
        guard !bytes.isEmpty else { throw InvalidTarget("host name is empty") }
        var body = bytes[...]
        if body.last == UInt8(ascii: ".") { body = body.dropLast() }
        guard !body.isEmpty else { throw InvalidTarget("host name \(quote(name)) has no label") }
        guard body.count <= maximumNameLength else {
            throw InvalidTarget(
                "host name \(quote(name)) is \(body.count) bytes long; at most \(maximumNameLength) are allowed")
        }
        let labels = body.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        for (i, label) in labels.enumerated() {
            let number = i + 1
            guard !label.isEmpty else {
                throw InvalidTarget("host name \(quote(name)): label \(number) is empty (two dots in a row, or a leading dot)")
            }
            let text = String(decoding: label, as: UTF8.self)
            guard label.count <= maximumLabelLength else {
                throw InvalidTarget("host name \(quote(name)): label \(number) (\(quote(text))) is \(label.count) "
                                    + "bytes long; at most \(maximumLabelLength) are allowed")
            }
            for byte in label where !isAllowed(byte) {
                let character = byte < 0x80 ? quote(String(UnicodeScalar(byte))) : "a non-ASCII byte"
                throw InvalidTarget("host name \(quote(name)): label \(number) (\(quote(text))) contains "
                                    + "\(character) (\(codePoint(byte))); allowed are ASCII letters, digits, "
                                    + "\"-\" and \"_\"")
            }
            if label.first == UInt8(ascii: "-") || label.last == UInt8(ascii: "-") {
                throw InvalidTarget("host name \(quote(name)): label \(number) (\(quote(text))) begins or ends "
                                    + "with \"-\"")
            }
        }
        return String(decoding: body.map(lowercased), as: UTF8.self)
    }

    /// The input can only be meant as an address literal (a colon, or only digits and dots).
    public static func looksLikeAddressLiteral(_ s: String) -> Bool {
        if s.contains(":") { return true }
        return !s.isEmpty && s.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: ".") }
    }

    private static func isAllowed(_ b: UInt8) -> Bool {
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
            || b == UInt8(ascii: "-") || b == UInt8(ascii: "_")
    }

    private static func lowercased(_ b: UInt8) -> UInt8 { (b >= 0x41 && b <= 0x5A) ? b + 0x20 : b }

    private static func codePoint(_ b: UInt8) -> String {
        let hex = String(b, radix: 16, uppercase: true)
        return b < 0x80 ? "U+" + String(repeating: "0", count: 4 - hex.count) + hex : "byte 0x" + hex
    }

    /// `text` quoted for a message: control characters escaped, at most 80 characters.
    public static func quote(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(80) {
            if scalar.value < 0x20 || scalar.value == 0x7F {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                out += "\\u{" + hex + "}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        if text.unicodeScalars.count > 80 { out += "…" }
        return "\"" + out + "\""
    }
}
