import Testing
import ReachabilityCore

/// Every derivation of a target description, per kind, without a bus or a parser
/// (addresses are their literals here).
@Suite("Target description: what derives from what a target is")
struct TargetDescriptionTests {
    typealias Described = TargetDescription<String>

    static let kinds: [Described] = [
        .internet(nil), .internet("0.0.0.0"), .host("example.com"), .address("192.0.2.1"),
        .pair(local: "192.0.2.10", remote: "198.51.100.7"), .pair(local: nil, remote: "198.51.100.7"),
        .pair(local: "192.0.2.10", remote: nil),
    ]

    @Test("kind, name and log name")
    func names() {
        #expect(Self.kinds.map(\.kind) == [.internet, .internet, .host, .address, .pair, .pair, .pair])
        #expect(Self.kinds.map(\.name) == [
            "", "0.0.0.0", "example.com", "192.0.2.1", "192.0.2.10,198.51.100.7", ",198.51.100.7", "192.0.2.10,",
        ])
        #expect(Self.kinds.map(\.logName) == [
            "internet", "internet", "example.com", "192.0.2.1", "192.0.2.10,198.51.100.7", ",198.51.100.7", "192.0.2.10,",
        ])
    }

    @Test("object path labels: the root's internet is the root; the internet asked as an address is that address's")
    func paths() {
        #expect(Described.internet(nil).pathLabels == [])
        #expect(Described.internet("0.0.0.0").pathLabels == ["address", PathEscaping.escapeLabel("0.0.0.0")])
        #expect(Described.host("example.com").pathLabels == ["host", "example_2ecom"])
        #expect(Described.pair(local: nil, remote: "198.51.100.7").pathLabels
                == ["pair", PathEscaping.escapeLabel(",198.51.100.7")])
    }

    @Test("the Manager call that holds each kind, and Query's text")
    func calls() {
        #expect(Described.internet(nil).holdingCall == ("WatchAddress", ["0.0.0.0"]))
        #expect(Described.internet("::").holdingCall == ("WatchAddress", ["::"]))
        #expect(Described.host("example.com").holdingCall == ("WatchHost", ["example.com"]))
        #expect(Described.address("192.0.2.1").holdingCall == ("WatchAddress", ["192.0.2.1"]))
        #expect(Described.pair(local: nil, remote: "198.51.100.7").holdingCall == ("WatchAddressPair", ["", "198.51.100.7"]))
        #expect(Self.kinds.map(\.queryText) == ["", "0.0.0.0", "example.com", "192.0.2.1", nil, nil, nil])
    }

    @Test("metric labels, names and asynchronous work")
    func labelsAndWork() {
        #expect(Described.internet(nil).metricLabels.map(\.value) == ["internet", "internet"])
        #expect(Described.host("example.com").metricLabels.map { "\($0.name)=\($0.value)" }
                == ["target=example.com", "kind=host"])
        #expect(Self.kinds.map(\.isName) == [false, false, true, false, false, false, false])
        #expect(Self.kinds.map(\.work) == [nil, nil, .nameLookup, nil, nil, nil, nil])
    }

    @Test("a listed Kind and Name give the description back; an unknown kind is not taken for another")
    func listed() {
        for described in Self.kinds {
            #expect(Described(kind: described.kind.rawValue, name: described.name) == described)
        }
        #expect(Described(kind: "endpoint", name: "example.com:443") == nil)
        #expect(Described(kind: "pair", name: "192.0.2.10") == nil)
    }

    @Test("map transforms every address and keeps the kind")
    func mapping() {
        let upper = Described.pair(local: "a", remote: nil).map { $0.uppercased() }
        #expect(upper == .pair(local: "A", remote: nil))
        #expect(Described.host("x").map { $0 + "!" } == .host("x"))
    }
}
