/// A target the daemon refuses to watch, with a message that says what is wrong
/// with the input (which label, which character, which limit). Mapped to the
/// D-Bus error `io.github.reachabilityd.Reachability1.Error.InvalidTarget`.
///
/// The message is always safe to send on the bus: valid UTF-8, no NUL, control
/// characters of the input escaped, the echoed input cut to
/// `InvalidTarget.echoLimit` characters.
public struct InvalidTarget: Error, Hashable, Sendable, CustomStringConvertible {
    public let message: String

    public init(message: String) {
        self.message = message
    }

    public var description: String { message }

    /// How many characters of the input a message echoes before it cuts with "…".
    public static let echoLimit = 80

    /// `input` in double quotes, fit to put in an error message: `"` and `\`
    /// backslash-escaped, control and invisible characters written as `\t`,
    /// `\n`, `\r`, `\0` or `\u{XX}`, and cut after `limit` characters with "…".
    public static func quoted(_ input: String, limit: Int = echoLimit) -> String {
        var out = "\""
        var count = 0
        for scalar in input.unicodeScalars {
            if count == limit {
                out += "…"
                break
            }
            out += escaped(scalar)
            count += 1
        }
        return out + "\""
    }

    /// One character as `"x" (U+0078)`, escaped like `quoted(_:)`.
    public static func describe(_ scalar: Unicode.Scalar) -> String {
        "\"\(escaped(scalar))\" (\(codePoint(scalar)))"
    }

    /// `U+XXXX`, at least four upper-case hex digits.
    static func codePoint(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }

    private static func escaped(_ scalar: Unicode.Scalar) -> String {
        switch scalar {
        case "\"": return "\\\""
        case "\\": return "\\\\"
        case "\t": return "\\t"
        case "\n": return "\\n"
        case "\r": return "\\r"
        case "\0": return "\\0"
        default: break
        }
        switch scalar.properties.generalCategory {
        case .control, .format, .lineSeparator, .paragraphSeparator, .privateUse, .surrogate,
            .unassigned:
            return "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
        default:
            return String(scalar)
        }
    }
}

/// Host-name validation and normalisation (docs/dbus-api.md, "Host names"), so that one
/// host has one object.
public enum TargetName {
    /// Raw inputs longer than this many UTF-8 bytes are refused before any other
    /// work, so a client cannot make the daemon walk huge strings.
    public static let maximumInputLength = 1024
    /// The longest host name, without its trailing dot.
    public static let maximumNameLength = 253
    /// The longest label.
    public static let maximumLabelLength = 63

    private static let allowedCharacters = #"allowed are ASCII letters, digits, "-" and "_""#

    /// The normalised form of a host name: lower-case ASCII; a trailing dot kept, since it
    /// makes the name absolute (looked up without the search list, as `getent ahosts name.`
    /// does), so `name` and `name.` are two targets.
    ///
    /// `name` must already be in its ASCII form (the caller converts IDN names
    /// with IDNA first); any non-ASCII character left is an error. Rules: not
    /// empty; one trailing dot allowed (and kept); at most 253 bytes without it; labels of
    /// 1–63 bytes made of ASCII letters, digits, `-` (never first or last) and
    /// `_`. A name whose last label is numeric (WHATWG's "ends in a number":
    /// all digits, or `0x` hex) is an IPv4 address, never a host name: it is
    /// returned only in canonical dotted-quad form, anything else (`2130706433`,
    /// `0177.0.0.1`, `1.2.3`) is refused with the canonical form to write. An
    /// address literal passes these rules, so ask `looksLikeAddressLiteral(_:)` first.
    public static func normalizeHost(_ name: String) throws(InvalidTarget) -> String {
        let byteCount = name.utf8.count
        if byteCount > maximumInputLength {
            throw InvalidTarget(
                message: "host name \(InvalidTarget.quoted(name)) is \(byteCount) bytes long; "
                    + "at most \(maximumInputLength) are accepted")
        }
        if name.isEmpty {
            throw InvalidTarget(message: "host name is empty")
        }
        if name == "." {
            throw InvalidTarget(
                message: #"host name ".": the root domain alone is not a host name"#)
        }

        // Quoted only for an error message: a valid name never pays for it.
        func quotedName() -> String { InvalidTarget.quoted(name) }
        var body = name.unicodeScalars[...]
        let isAbsolute = body.last == "."
        if isAbsolute { body = body.dropLast() }

        let labels = body.split(separator: ".", omittingEmptySubsequences: false)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(byteCount)
        for (index, label) in labels.enumerated() {
            let number = index + 1
            if label.isEmpty {
                let why =
                    index == 0
                    ? "the name starts with a dot"
                    : index == labels.count - 1 ? "the name ends with two dots" : "two dots in a row"
                throw InvalidTarget(
                    message: "host name \(quotedName()): label \(number) is empty (\(why)); "
                        + "labels are 1 to \(maximumLabelLength) bytes long")
            }
            func quotedLabel() -> String { InvalidTarget.quoted(String(label)) }
            for scalar in label where !isAllowed(scalar) {
                let notASCII = scalar.isASCII ? "" : ", which is not ASCII (IDN names must be converted first)"
                throw InvalidTarget(
                    message: "host name \(quotedName()): label \(number) (\(quotedLabel())) contains "
                        + "\(InvalidTarget.describe(scalar))\(notASCII); \(allowedCharacters)")
            }
            // Only ASCII from here on: one scalar is one byte.
            if label.first == "-" || label.last == "-" {
                let which = label.first == "-" ? "starts" : "ends"
                throw InvalidTarget(
                    message: "host name \(quotedName()): label \(number) (\(quotedLabel())) \(which) with "
                        + #""-"; a hyphen may not begin or end a label"#)
            }
            if label.count > maximumLabelLength {
                throw InvalidTarget(
                    message: "host name \(quotedName()): label \(number) (\(quotedLabel())) is "
                        + "\(label.count) bytes long; at most \(maximumLabelLength) are allowed in a label")
            }
            if index > 0 { bytes.append(UInt8(ascii: ".")) }
            for scalar in label {
                let b = UInt8(scalar.value)
                bytes.append(b >= 0x41 && b <= 0x5A ? b + 0x20 : b)
            }
        }
        if bytes.count > maximumNameLength {
            throw InvalidTarget(
                message: "host name \(quotedName()) is \(bytes.count) bytes long without a trailing dot; "
                    + "at most \(maximumNameLength) are allowed")
        }
        let normalized = String(decoding: bytes, as: UTF8.self)
        if let last = labels.last, endsInANumber(last) {
            // An address, never a name: its root dot means nothing ("192.0.2.1." is 192.0.2.1).
            let address = whatwgIPv4(normalized)
            if address != normalized {
                throw InvalidTarget(message: numericNameMessage(quotedName(), address: address))
            }
            return normalized
        }
        return isAbsolute ? normalized + "." : normalized
    }

    // MARK: Names that end in a number (WHATWG URL host parsing)

    /// The message for a name whose last label is numeric and which is not a
    /// canonical dotted-quad IPv4 address; `address` is what the WHATWG IPv4
    /// parser makes of it, if anything.
    static func numericNameMessage(_ quotedName: String, address: String?) -> String {
        let why = "host name \(quotedName): its last label is a number, so it is an IPv4 address and not a host name "
            + "(WHATWG URL host rules; the system resolver would read it as an address too)"
        guard let address else {
            return why + ", and it is not a valid one: write an IPv4 address as four decimal numbers 0-255 "
                + "separated by dots (like 192.0.2.1), or give a host name whose last label is not numeric"
        }
        return why + ", but not in canonical dotted-quad form: write it as \(address)"
    }

    /// The WHATWG URL "ends in a number" checker for a name's last label (the
    /// name without a trailing dot): the label is all ASCII digits, or an IPv4
    /// number in another form (`0x7f`, `0X`, `017`).
    public static func endsInANumber<Label: Collection<Unicode.Scalar>>(_ lastLabel: Label) -> Bool {
        if !lastLabel.isEmpty && lastLabel.allSatisfy({ $0 >= "0" && $0 <= "9" }) { return true }
        return ipv4Number(lastLabel) != nil
    }

    /// The WHATWG URL IPv4 parser: the dotted-quad address `name` (no trailing dot)
    /// denotes in a URL — one to four parts, each decimal, `0x` hex or `0` octal,
    /// the last filling the remaining bytes (`2130706433`, `0177.0.0.1`, `0x7f.1`
    /// are 127.0.0.1; `1.2.3` is 1.2.0.3) — or `nil` if it is not an IPv4 address.
    public static func whatwgIPv4(_ name: String) -> String? {
        let parts = name.unicodeScalars.split(separator: ".", omittingEmptySubsequences: false)
        guard !parts.isEmpty, parts.count <= 4 else { return nil }
        var numbers: [UInt64] = []
        for part in parts {
            guard let number = ipv4Number(part) else { return nil }
            numbers.append(number)
        }
        guard numbers.dropLast().allSatisfy({ $0 <= 255 }) else { return nil }
        let lastLimit = UInt64(1) << (8 * (5 - numbers.count))
        guard numbers.last! < lastLimit else { return nil }
        var value = numbers.last!
        for (i, number) in numbers.dropLast().enumerated() {
            value += number << (8 * (3 - i))
        }
        return "\(value >> 24 & 0xFF).\(value >> 16 & 0xFF).\(value >> 8 & 0xFF).\(value & 0xFF)"
    }

    /// The WHATWG URL IPv4 number parser: decimal, `0x`/`0X` hex (the digits may
    /// be absent: `0x` is 0) or `0`-prefixed octal; `nil` on any other character,
    /// on an empty part, or above 2^32 (anything larger is refused anyway).
    static func ipv4Number<Part: Collection<Unicode.Scalar>>(_ part: Part) -> UInt64? {
        guard !part.isEmpty else { return nil }
        var digits = part[...]
        var radix: UInt64 = 10
        if digits.count >= 2, digits.first == "0" {
            let second = digits[digits.index(after: digits.startIndex)]
            if second == "x" || second == "X" {
                digits = digits.dropFirst(2)
                radix = 16
            } else {
                digits = digits.dropFirst()
                radix = 8
            }
        }
        var value: UInt64 = 0
        for scalar in digits {
            let digit: UInt64
            switch scalar {
            case "0"..."9": digit = UInt64(scalar.value - 0x30)
            case "a"..."f" where radix == 16: digit = UInt64(scalar.value - 0x61 + 10)
            case "A"..."F" where radix == 16: digit = UInt64(scalar.value - 0x41 + 10)
            default: return nil
            }
            guard digit < radix else { return nil }
            // Saturate: the value is only compared with limits at most 2^32.
            value = min(value * radix + digit, UInt64(1) << 33)
        }
        return value
    }

    /// Whether `s` should be parsed as an IPv4 or IPv6 address literal rather
    /// than validated as a host name: it contains ":" (IPv6, with or without a
    /// `%scope`), or it is made only of ASCII digits and dots with at least one
    /// digit (IPv4). Says nothing about whether the literal is valid.
    public static func looksLikeAddressLiteral(_ s: String) -> Bool {
        var sawDigit = false
        var onlyDigitsAndDots = true
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: ":"): return true
            case UInt8(ascii: "0")...UInt8(ascii: "9"): sawDigit = true
            case UInt8(ascii: "."): break
            default: onlyDigitsAndDots = false
            }
        }
        return sawDigit && onlyDigitsAndDots
    }

    private static func isAllowed(_ s: Unicode.Scalar) -> Bool {
        switch s {
        case "a"..."z", "A"..."Z", "0"..."9", "-", "_": true
        default: false
        }
    }
}
