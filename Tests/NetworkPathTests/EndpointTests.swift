import Testing
@testable import NetworkPath

@Suite("NWEndpoint, IPv4Address and IPv6Address")
struct EndpointTests {
    @Test("IPv4 literals parse to their bytes and print back", arguments: [
        ("192.0.2.1", [192, 0, 2, 1]), ("0.0.0.0", [0, 0, 0, 0]), ("255.255.255.255", [255, 255, 255, 255]),
    ] as [(String, [UInt8])])
    func ipv4(text: String, bytes: [UInt8]) {
        let address = IPv4Address(text)
        #expect(address?.rawValue == bytes)
        #expect(address?.debugDescription == text)
    }

    @Test("not IPv4", arguments: ["", "1.2.3", "1.2.3.4.5", "256.1.1.1", "01.2.3.4", "1..2.3", "a.b.c.d", " 1.2.3.4",
                                  "1.2.3.4 ", "::1"])
    func notIPv4(text: String) {
        #expect(IPv4Address(text) == nil)
    }

    @Test("IPv6 literals parse and print in RFC 5952 form", arguments: [
        ("2001:db8::1", "2001:db8::1"), ("::", "::"), ("::1", "::1"), ("fe80::1%eth0", "fe80::1"),
        ("2001:DB8:0:0:1:0:0:1", "2001:db8::1:0:0:1"), ("1:0:0:2:0:0:0:3", "1:0:0:2::3"),
        ("2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"), ("::ffff:192.0.2.1", "::ffff:c000:201"),
        ("1:2:3:4:5:6:7::", "1:2:3:4:5:6:7:0"),
    ])
    func ipv6(text: String, canonical: String) {
        #expect(IPv6Address(text)?.debugDescription == canonical)
    }

    @Test("not IPv6", arguments: ["", ":", ":::", "1::2::3", "1:2:3:4:5:6:7:8:9", "12345::", "g::1", "1:2:3:4:5:6:7",
                                  "::1.2.3", "1.2.3.4"])
    func notIPv6(text: String) {
        #expect(IPv6Address(text) == nil)
    }

    @Test("address properties")
    func properties() {
        #expect(IPv4Address.loopback.isLoopback && IPv4Address("169.254.1.1")!.isLinkLocal)
        #expect(IPv4Address("224.0.0.1")!.isMulticast && !IPv4Address("192.0.2.1")!.isMulticast)
        #expect(IPv6Address.loopback.isLoopback && IPv6Address("fe80::1")!.isLinkLocal)
        #expect(IPv6Address("ff02::1")!.isMulticast && IPv6Address("::ffff:1.2.3.4")!.isIPv4Mapped)
        #expect(IPv4Address([1, 2, 3]) == nil && IPv6Address([UInt8](repeating: 0, count: 4)) == nil)
    }

    @Test("hosts: address literals become addresses, the rest names")
    func hosts() {
        #expect(NWEndpoint.Host("192.0.2.1") == .ipv4(IPv4Address("192.0.2.1")!))
        #expect(NWEndpoint.Host("2001:db8::1") == .ipv6(IPv6Address("2001:db8::1")!))
        let named: NWEndpoint.Host = "example.com"
        #expect(named == .name("example.com", nil))
    }

    @Test("ports: integer literals, text, well-known names")
    func ports() {
        let port: NWEndpoint.Port = 8080
        #expect(port.rawValue == 8080)
        #expect(NWEndpoint.Port("443") == .https && NWEndpoint.Port("x") == nil && NWEndpoint.Port("70000") == nil)
        #expect(NWEndpoint.Port(rawValue: 80) == .http)
        #expect(NWEndpoint.hostPort(host: "2001:db8::1", port: 443).debugDescription == "[2001:db8::1]:443")
        #expect(NWEndpoint.hostPort(host: "192.0.2.1", port: .any).debugDescription == "192.0.2.1:0")
    }
}
