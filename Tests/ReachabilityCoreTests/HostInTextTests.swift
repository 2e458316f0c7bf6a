import Testing
import ReachabilityCore

@Suite("A URL or a host and a port where a host or an address goes")
struct HostInTextTests {
    @Test("recognised, with the host they name", arguments: [
        ("https://example.com", HostInText.url(host: "example.com")),
        ("http://user@example.com:8080/index.html", .url(host: "example.com")),
        ("https://[2001:db8::1]/", .url(host: "2001:db8::1")),
        ("https://[2001:db8::1]:8443/x", .url(host: "2001:db8::1")),
        ("git+ssh://example.com/repo?x#y", .url(host: "example.com")),
        ("file:///etc/hosts", .url(host: "")),
        ("example.com:443", .hostAndPort(host: "example.com")),
        ("192.0.2.1:80", .hostAndPort(host: "192.0.2.1")),
        ("[2001:db8::1]:443", .hostAndPort(host: "2001:db8::1")),
    ])
    func recognised(text: String, expected: HostInText) {
        #expect(HostInText.recognise(text) == expected)
    }

    @Test("not for host names, address literals or other mistakes", arguments: [
        "example.com", "192.0.2.1", "2001:db8::1", "::1", "fe80::1%lo", "1::2", "[2001:db8::1]",
        "example.com:", "example.com:123456", "example.com:http", ":443", "a:b:1", "1http://x", "://x", "",
    ])
    func others(text: String) {
        #expect(HostInText.recognise(text) == nil)
    }

    @Test("the message says what it is and names the host")
    func message() {
        #expect(HostInText.url(host: "example.com").message(for: "https://example.com/a")
                == #""https://example.com/a" is a URL, not a host name or an address: its host is "example.com""#)
        #expect(HostInText.url(host: "").message(for: "file:///x")
                == #""file:///x" is a URL, not a host name or an address (it names no host)"#)
        #expect(HostInText.hostAndPort(host: "example.com").message(for: "example.com:443")
                == #""example.com:443" is a host and a port, not a host name or an address (reachability does "#
                + #"not depend on the port): the host is "example.com""#)
    }
}
