import Testing
@testable import ReachabilityCore

private let label63 = String(repeating: "a", count: 63)
private let label64 = String(repeating: "b", count: 64)
/// 63 + 1 + 63 + 1 + 63 + 1 + 61 = 253 bytes.
private let name253 = [label63, label63, label63, String(repeating: "c", count: 61)].joined(separator: ".")
/// 254 bytes.
private let name254 = [label63, label63, label63, String(repeating: "c", count: 62)].joined(separator: ".")

/// Inputs `normalizeHost` must refuse, with a substring its message must contain.
private let badInputs: [(input: String, expected: String)] = [
    ("", "host name is empty"),
    (".", "the root domain alone is not a host name"),
    ("..", "label 1 is empty (the name starts with a dot)"),
    ("...", "label 1 is empty"),
    (".a", "label 1 is empty (the name starts with a dot)"),
    ("a..b", "label 2 is empty (two dots in a row)"),
    ("a..", "label 2 is empty (the name ends with two dots)"),
    ("a...", "label 2 is empty (two dots in a row)"),
    ("example.com..", "label 3 is empty (the name ends with two dots)"),
    (name254, "is 254 bytes long without a trailing dot; at most 253 are allowed"),
    (name254 + ".", "is 254 bytes long without a trailing dot; at most 253 are allowed"),
    (label64, "label 1 (\"\(label64)\") is 64 bytes long; at most 63 are allowed in a label"),
    ("www.\(label64).com", "label 2 (\"\(label64)\") is 64 bytes long"),
    (String(repeating: "x", count: 1025), "is 1025 bytes long; at most 1024 are accepted"),
    ("exa mple.com", #"label 1 ("exa mple") contains " " (U+0020)"#),
    (" example.com", #"label 1 (" example") contains " " (U+0020)"#),
    ("example.com ", #"label 2 ("com ") contains " " (U+0020)"#),
    ("a\tb", #"label 1 ("a\tb") contains "\t" (U+0009)"#),
    ("a\0b", #"label 1 ("a\0b") contains "\0" (U+0000)"#),
    ("a\nb", #"contains "\n" (U+000A)"#),
    ("a\rb", #"contains "\r" (U+000D)"#),
    ("a\u{1B}b", #"contains "\u{1B}" (U+001B)"#),
    ("a\u{7F}b", #"contains "\u{7F}" (U+007F)"#),
    ("a\u{85}b", #"contains "\u{85}" (U+0085), which is not ASCII"#),
    ("-a.com", #"label 1 ("-a") starts with "-"; a hyphen may not begin or end a label"#),
    ("a-.com", #"label 1 ("a-") ends with "-""#),
    ("www.-x.com", #"label 2 ("-x") starts with "-""#),
    ("example.com-", #"label 2 ("com-") ends with "-""#),
    ("-", #"label 1 ("-") starts with "-""#),
    ("a/b", #"contains "/" (U+002F)"#),
    ("a@b", #"contains "@" (U+0040)"#),
    ("café.com", #"label 1 ("café") contains "é" (U+00E9), which is not ASCII (IDN names must be converted first)"#),
    ("😀.com", #"contains "😀" (U+1F600), which is not ASCII"#),
    ("example\u{3002}com", #"contains "。" (U+3002), which is not ASCII"#),
    ("a\u{A0}b", "(U+00A0), which is not ASCII"),
    ("a\u{200B}b", #"label 1 ("a\u{200B}b") contains "\u{200B}" (U+200B)"#),
    ("a\u{202E}b", #"contains "\u{202E}" (U+202E)"#),
    ("*.example.com", #"label 1 ("*") contains "*" (U+002A)"#),
    ("a:b", #"contains ":" (U+003A)"#),
    ("http://example.com", #"label 1 ("http://example") contains ":" (U+003A)"#),
    ("example,com", #"contains "," (U+002C)"#),
    ("exa\"mple", #"label 1 ("exa\"mple") contains "\"" (U+0022)"#),
    ("a\\b", #"label 1 ("a\\b") contains "\\" (U+005C)"#),
    ("[::1]", #"contains "[" (U+005B)"#),
    ("a+b.com", #"contains "+" (U+002B)"#),
    ("a%b.com", #"contains "%" (U+0025)"#),
]

/// Inputs `normalizeHost` must accept, with their normalised form.
private let goodInputs: [(input: String, normalized: String)] = [
    ("Example.COM.", "example.com."),
    ("example.com", "example.com"),
    ("_sip._tcp.example.com", "_sip._tcp.example.com"),
    ("_Sip._TCP.Example.com.", "_sip._tcp.example.com."),
    (label63, label63),
    ("www.\(label63.uppercased()).com", "www.\(label63).com"),
    (name253, name253),
    (name253 + ".", name253 + "."),
    (name253.uppercased(), name253),
    ("localhost", "localhost"),
    ("LOCALHOST.", "localhost."),
    ("a-b.c", "a-b.c"),
    ("a--b.com", "a--b.com"),
    ("host", "host"),
    ("a", "a"),
    ("Z.", "z."),
    ("_", "_"),
    ("_a_.b_", "_a_.b_"),
    ("123.example", "123.example"),
    ("0.example.42x", "0.example.42x"),
    ("example.0xg", "example.0xg"),
    ("1e3", "1e3"),
    ("192.0.2.1", "192.0.2.1"),
    ("192.0.2.1.", "192.0.2.1"),
    ("xn--caf-dma.com", "xn--caf-dma.com"),
    ("XN--CAF-DMA.COM", "xn--caf-dma.com"),
]

/// Names whose last label is numeric and which are not canonical dotted quads:
/// the WHATWG URL IPv4 parser's answer, or `nil` where it has none.
private let namesEndingInANumber: [(input: String, address: String?)] = [
    ("2130706433", "127.0.0.1"),
    ("0177.0.0.1", "127.0.0.1"),
    ("1.2.3", "1.2.0.3"),
    ("0x7f.1", "127.0.0.1"),
    ("0X7F.0.0.1", "127.0.0.1"),
    ("127.1", "127.0.0.1"),
    ("0x", "0.0.0.0"),
    ("0.example.42", nil),
    ("example.0x10", nil),
    ("256.1.1.1", nil),
    ("1.2.3.4.5", nil),
    ("4294967296", nil),
    ("09.1.1.1", nil),
    ("01.2.3.4", "1.2.3.4"),
    ("192.0.2.001", "192.0.2.1"),
]

/// A message is safe on D-Bus and readable: no control character at all (the
/// input's are escaped), and bounded whatever the input's length.
private func isSafe(_ message: String) -> Bool {
    !message.unicodeScalars.contains { $0.properties.generalCategory == .control }
        && message.unicodeScalars.count <= 400
}

@Suite("Host-name validation")
struct TargetNameTests {
    @Test("bad inputs are refused, and the message names the problem", arguments: badInputs)
    func refuses(input: String, expected: String) {
        let error = #expect(throws: InvalidTarget.self) { try TargetName.normalizeHost(input) }
        guard let message = error?.message else { return }
        #expect(message.contains(expected), "message: \(message)")
        #expect(isSafe(message), "message: \(message)")
    }

    @Test("there are at least 30 bad inputs")
    func tableIsLargeEnough() {
        #expect(badInputs.count >= 30)
    }

    @Test("the message for a space is exactly the documented one")
    func spaceMessage() {
        #expect(throws: InvalidTarget(message:
            #"host name "exa mple.com": label 1 ("exa mple") contains " " (U+0020); "#
            + #"allowed are ASCII letters, digits, "-" and "_""#)) {
            try TargetName.normalizeHost("exa mple.com")
        }
    }

    @Test("a huge input is refused up front and echoed only in part")
    func hugeInput() {
        let input = String(repeating: "y", count: TargetName.maximumInputLength + 1)
        let error = #expect(throws: InvalidTarget.self) { try TargetName.normalizeHost(input) }
        guard let message = error?.message else { return }
        #expect(message.contains("\"" + String(repeating: "y", count: InvalidTarget.echoLimit) + "…\""))
        #expect(!message.contains(String(repeating: "y", count: InvalidTarget.echoLimit + 1)))
        #expect(message.contains("1024"))
    }

    @Test("an input of exactly the maximum length gets past the size check")
    func maximumInputLength() {
        let input = String(repeating: "y", count: TargetName.maximumInputLength)
        let error = #expect(throws: InvalidTarget.self) { try TargetName.normalizeHost(input) }
        // Refused for its label length, not for its raw size.
        #expect(error?.message.contains("at most 63 are allowed in a label") == true)
    }

    @Test("a long label is echoed cut to the echo limit")
    func longLabelEcho() {
        let label = String(repeating: "q", count: 300)
        let error = #expect(throws: InvalidTarget.self) { try TargetName.normalizeHost(label + ".com") }
        guard let message = error?.message else { return }
        #expect(message.contains("label 1 (\"" + String(repeating: "q", count: 80) + "…\") is 300 bytes long"))
        #expect(isSafe(message))
    }

    @Test("good inputs are normalised", arguments: goodInputs)
    func normalizes(input: String, normalized: String) throws {
        #expect(try TargetName.normalizeHost(input) == normalized)
    }

    @Test("normalising is idempotent", arguments: goodInputs.map(\.normalized))
    func idempotent(name: String) throws {
        #expect(try TargetName.normalizeHost(name) == name)
    }

    @Test("a name whose last label is numeric is a canonical IPv4 address or refused, with the form to write",
          arguments: namesEndingInANumber)
    func endingInANumber(input: String, address: String?) {
        #expect {
            _ = try TargetName.normalizeHost(input)
        } throws: { error in
            guard let message = (error as? InvalidTarget)?.message, isSafe(message) else { return false }
            let named = message.contains("its last label is a number, so it is an IPv4 address and not a host name")
            if let address {
                return named && message.hasSuffix("not in canonical dotted-quad form: write it as \(address)")
            }
            return named && message.contains("it is not a valid one")
        }
    }

    @Test("the exact message for 2130706433")
    func numericMessage() {
        #expect(throws: InvalidTarget(message: #"host name "2130706433": its last label is a number, so it is an "#
            + "IPv4 address and not a host name (WHATWG URL host rules; the system resolver would read it as an "
            + "address too), but not in canonical dotted-quad form: write it as 127.0.0.1")) {
            _ = try TargetName.normalizeHost("2130706433")
        }
    }

    @Test("WHATWG's ends-in-a-number and IPv4 parsers")
    func whatwg() {
        #expect(TargetName.endsInANumber("42".unicodeScalars))
        #expect(TargetName.endsInANumber("0x".unicodeScalars))
        #expect(TargetName.endsInANumber("0xFF".unicodeScalars))
        #expect(TargetName.endsInANumber("09".unicodeScalars))  // all digits, though not octal
        #expect(!TargetName.endsInANumber("0xg".unicodeScalars))
        #expect(!TargetName.endsInANumber("42a".unicodeScalars))
        #expect(!TargetName.endsInANumber("".unicodeScalars))
        #expect(TargetName.whatwgIPv4("4294967295") == "255.255.255.255")
        #expect(TargetName.whatwgIPv4("4294967296") == nil)
        #expect(TargetName.whatwgIPv4("1.16777215") == "1.255.255.255")
        #expect(TargetName.whatwgIPv4("1.16777216") == nil)
        #expect(TargetName.whatwgIPv4("0x100.1") == nil)
        #expect(TargetName.whatwgIPv4("1..2") == nil)
        #expect(TargetName.whatwgIPv4("example.com") == nil)
    }

    @Test("address literals are recognised", arguments: [
        "127.0.0.1", "0.0.0.0", "::1", "::", "fe80::1%eth0", "2001:db8::1", "::ffff:192.0.2.1",
        "1.2.3", "999.1.1.1", "0", "1.2.3.4.", "[::1]", "a:b",
    ])
    func addressLiterals(s: String) {
        #expect(TargetName.looksLikeAddressLiteral(s))
    }

    @Test("host names are not taken for address literals", arguments: [
        "", ".", "...", "example.com", "123.example", "localhost", "1.2.3.a", "0x7f.0.0.1", "1e3",
        "1.2.3.4-", " 1.2.3.4",
    ])
    func notAddressLiterals(s: String) {
        #expect(!TargetName.looksLikeAddressLiteral(s))
    }

    @Test("quoting escapes control characters and quotes and cuts long inputs")
    func quoting() {
        #expect(InvalidTarget.quoted("a\"b\\c\td\0e\u{1}") == #""a\"b\\c\td\0e\u{1}""#)
        #expect(InvalidTarget.quoted("éü") == "\"éü\"")
        #expect(InvalidTarget.quoted("abcdef", limit: 3) == "\"abc…\"")
        #expect(InvalidTarget.quoted("abc", limit: 3) == "\"abc\"")
        #expect(InvalidTarget.describe("\u{1F600}") == "\"😀\" (U+1F600)")
        #expect(InvalidTarget.describe("\u{7}") == #""\u{7}" (U+0007)"#)
    }
}
