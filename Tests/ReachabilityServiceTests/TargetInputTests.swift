import Testing
@testable import ReachabilityBus
import ReachabilityCore
import ReachabilityPlatform
@testable import ReachabilityService

/// What a parsed target is called on the bus, compared as one value.
private struct TargetKey: Equatable {
    let kind: TargetKind
    let name: String
}

extension TargetDescription where Address == IPAddress {
    fileprivate var key: TargetKey { TargetKey(kind: kind, name: name) }
}

@Suite("Target input: parsing, normalising, paths")
struct TargetInputTests {
    @Test("address literals are canonicalised", arguments: [
        ("127.0.0.1", "127.0.0.1"),
        ("::1", "::1"),
        ("0:0:0:0:0:0:0:1", "::1"),
        ("2001:DB8::0:1", "2001:db8::1"),
        ("::ffff:192.0.2.1", "192.0.2.1"),  // IPv4-mapped: the IPv4 address
        ("fe80::1%lo", "fe80::1%lo"),
    ])
    func addresses(input: String, canonical: String) throws {
        let parsed = try TargetInput.parseAddress(input)
        #expect(parsed.key == TargetKey(kind: .address, name: canonical))
    }

    @Test("bad address literals name the problem", arguments: [
        ("1.2.3", "not an IPv4 or IPv6 address literal"),
        ("256.1.1.1", "not an IPv4 or IPv6 address literal"),
        ("01.2.3.4", "not an IPv4 or IPv6 address literal"),
        ("::1::2", "not an IPv4 or IPv6 address literal"),
        ("fe80::1%nosuch", "no interface \"nosuch\""),
        ("192.0.2.1%lo", "not an IPv4 or IPv6 address literal"),
        ("", "not an IPv4 or IPv6 address literal"),
        ("example.com", "not an IPv4 or IPv6 address literal"),
        ("example.com:443", #"is a host and a port, not a host name or an address"#),
        ("https://192.0.2.1/", #"is a URL, not a host name or an address: its host is "192.0.2.1""#),
    ])
    func badAddresses(input: String, message: String) {
        #expect {
            _ = try TargetInput.validAddress(input)
        } throws: { error in
            let error = error as? BusError
            return error?.name == "io.github.reachabilityd.Reachability1.Error.InvalidTarget"
                && error?.message.contains(message) == true
        }
    }

    @Test("WatchHost, Query and the library refuse a URL or a host and a port, naming the host", arguments: [
        ("https://example.com/index.html", #"is a URL, not a host name or an address: its host is "example.com""#),
        ("example.com:443", #"is a host and a port, not a host name or an address (reachability does not "#
            + #"depend on the port): the host is "example.com""#),
        ("[2001:db8::1]:443", #"the host is "2001:db8::1""#),
    ])
    func namedHosts(input: String, message: String) {
        #expect {
            _ = try TargetInput.parseHost(input)
        } throws: { error in
            (error as? InvalidTarget)?.message.contains(message) == true
        }
    }

    @Test("WatchHost with a literal watches the address, as Apple does")
    func hostLiteral() throws {
        #expect(try TargetInput.parseHost("127.0.0.1").key == TargetKey(kind: .address, name: "127.0.0.1"))
        #expect(try TargetInput.parseHost("::1").key == TargetKey(kind: .address, name: "::1"))
    }

    @Test("host names are lower-cased, keep a trailing dot (absolute: another target), and IDN becomes ASCII")
    func hosts() throws {
        #expect(try TargetInput.parseHost("Example.COM.").key == TargetKey(kind: .host, name: "example.com."))
        #expect(try TargetInput.parseHost("Example.COM").key == TargetKey(kind: .host, name: "example.com"))
        #expect(try TargetInput.parseHost("192.0.2.1.").key == TargetKey(kind: .address, name: "192.0.2.1"))
        #expect(try TargetInput.parseHost("::ffff:192.0.2.1").key == TargetKey(kind: .address, name: "192.0.2.1"),
                "an IPv4-mapped address is that IPv4 address")
        #expect(try TargetInput.parseAddress("::FFFF:198.51.100.7").key == TargetKey(kind: .address, name: "198.51.100.7"))
        #expect(try TargetInput.parseAddress("::fffe:198.51.100.7").key.kind == .address)
        #expect(try TargetInput.parseAddress("::fffe:198.51.100.7").key.name == "::fffe:c633:6407")
        #expect(try TargetInput.parseHost("bücher.example").key
                == TargetKey(kind: .host, name: "xn--bcher-kva.example"))
    }

    @Test("over-long input is refused before any work")
    func huge() {
        #expect(throws: InvalidTarget.self) { _ = try TargetInput.parseHost(String(repeating: "a", count: 100_000)) }
        #expect(throws: InvalidTarget.self) { _ = try TargetInput.parseAddress(String(repeating: "1", count: 100_000)) }
    }

    @Test("object paths are computable: sd_bus_path_encode under host/ and address/")
    func paths() throws {
        #expect(try TargetInput.parseHost("example.com").path.rawValue
                == "/io/github/reachabilityd/Reachability1/host/example_2ecom")
        #expect(try TargetInput.parseAddress("127.0.0.1").path.rawValue
                == "/io/github/reachabilityd/Reachability1/address/_3127_2e0_2e0_2e1")
    }

    @Test("messages quote input safely")
    func quoting() {
        #expect(TargetInput.quoted("a\u{1}b") == "\"a\\u{1}b\"")
        #expect(TargetInput.quoted(String(repeating: "x", count: 100)).hasSuffix("…\""))
    }
}

@Suite("Names that end in a number (WHATWG URL host rule)")
struct NumericHostTests {
    @Test("WatchHost and Query refuse them, naming the canonical address to write", arguments: [
        ("2130706433", "write it as 127.0.0.1"),
        ("0177.0.0.1", "write it as 127.0.0.1"),
        ("1.2.3", "write it as 1.2.0.3"),
        ("0x7f.1", "write it as 127.0.0.1"),
        ("1.2.3.4.5", "it is not a valid one"),
        ("www.example.123", "it is not a valid one"),
    ])
    func refused(input: String, message: String) {
        #expect {
            _ = try TargetInput.validHost(input)
        } throws: { error in
            let error = error as? BusError
            return error?.name == "io.github.reachabilityd.Reachability1.Error.InvalidTarget"
                && error?.message.contains("its last label is a number") == true
                && error?.message.contains(message) == true
        }
    }

    @Test("a canonical dotted quad (with or without the root's dot) is that address")
    func canonical() throws {
        #expect(try TargetInput.parseHost("127.0.0.1.").key == TargetKey(kind: .address, name: "127.0.0.1"))
    }

    @Test("WatchAddress names the canonical form too", arguments: [("1.2.3", "1.2.0.3"), ("0x7f.1", "127.0.0.1")])
    func address(input: String, canonical: String) {
        #expect {
            _ = try TargetInput.parseAddress(input)
        } throws: { error in
            (error as? InvalidTarget)?.message.contains("write it as \(canonical)") == true
        }
    }
}

@Suite("An address literal with the root's dot")
struct RootDotLiteralTests {
    @Test("is that address (found by the names fuzz target)")
    func literal() throws {
        #expect(try TargetInput.parseHost("192.0.2.1.") == TargetInput.parseHost("192.0.2.1"))
        #expect(try TargetInput.parseHost("1.22.0.2.").key == TargetKey(kind: .address, name: "1.22.0.2"))
    }
}

@Suite("Input the C libraries would cut at a NUL")
struct NULInputTests {
    @Test("a NUL is rejected before inet_pton or IDN conversion could read only the part before it",
          arguments: ["192.0.2.1\u{0}x", "2001:db8::1\u{0}", "bücher\u{0}.example", "example.com\u{0}", "\u{0}"])
    func rejected(input: String) {
        #expect {
            _ = try TargetInput.parseHost(input)
        } throws: { error in
            (error as? InvalidTarget)?.message.contains("contains a NUL character") == true
        }
    }
}

@Suite("Address pairs as WatchAddressPair parses them")
struct AddressPairInputTests {
    @Test("both, either one, canonical literals joined by a comma")
    func accepted() throws {
        #expect(try TargetInput.parsePair(local: "192.0.2.10", remote: "198.51.100.7").name == "192.0.2.10,198.51.100.7")
        #expect(try TargetInput.parsePair(local: "", remote: "2001:DB8::1").name == ",2001:db8::1")
        #expect(try TargetInput.parsePair(local: "192.0.2.10", remote: "").name == "192.0.2.10,")
        #expect(try TargetInput.parsePair(local: "192.0.2.10", remote: "198.51.100.7").kind == .pair)
    }

    @Test("refused with a message that says why",
          arguments: [("", "", "needs a local or a remote address"), ("192.0.2.10", "2001:db8::1", "not of one family"),
                      ("example.com", "", "local address: \"example.com\" is not"),
                      ("", "1.2.3", "remote address: \"1.2.3\" is not")])
    func refused(local: String, remote: String, message: String) {
        #expect(throws: InvalidTarget.self) { try TargetInput.parsePair(local: local, remote: remote) }
        do {
            _ = try TargetInput.parsePair(local: local, remote: remote)
        } catch {
            #expect(error.message.contains(message), "\(error.message)")
        }
    }
}
