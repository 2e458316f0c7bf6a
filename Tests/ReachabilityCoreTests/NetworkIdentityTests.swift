import Testing
@testable import ReachabilityCore

@Suite("Network identity and invalidations: what makes a network another")
struct NetworkIdentityTests {
    private func route(_ mac: [UInt8]?, prefixes: [String] = ["192.0.2.0/24"]) -> NetworkIdentity.Route {
        .init(family: .ipv4, link: "eth0", gateway: "192.0.2.1", gatewayLinkLayer: mac, prefixes: prefixes)
    }

    @Test("the material: the gateway's link-layer address and the prefixes, not the gateway's IP; none without a route")
    func material() {
        let a = NetworkIdentity.material(routes: [route([2, 0, 0, 0, 0, 1])])
        #expect(a == "4 mac=020000000001 prefixes=192.0.2.0/24")
        #expect(NetworkIdentity.material(routes: [route([2, 0, 0, 0, 0, 2])]) != a, "another router")
        #expect(NetworkIdentity.material(routes: [route([2, 0, 0, 0, 0, 1], prefixes: ["192.0.2.0/24", "192.0.2.0/24"])]) == a,
                "two addresses of one prefix are one prefix")
        #expect(NetworkIdentity.material(routes: []) == nil)
        let onLink = NetworkIdentity.Route(family: .ipv6, link: "ppp0", gateway: nil, gatewayLinkLayer: nil, prefixes: [])
        #expect(NetworkIdentity.material(routes: [onLink]) == "6 onlink=ppp0 prefixes=")
    }

    @Test("the SSID is a line of its own, as bytes: another SSID is another network, none is not the same as one")
    func materialWithSSID() {
        let home = NetworkIdentity.material(routes: [route([2, 0, 0, 0, 0, 1])], ssid: Array("Home".utf8))
        #expect(home == "ssid=486f6d65\n4 mac=020000000001 prefixes=192.0.2.0/24")
        #expect(NetworkIdentity.material(routes: [route([2, 0, 0, 0, 0, 1])], ssid: Array("Cafe".utf8)) != home)
        #expect(NetworkIdentity.material(routes: [route([2, 0, 0, 0, 0, 1])]) != home)
        let raw = NetworkIdentity.material(routes: [route([2, 0, 0, 0, 0, 1])], ssid: [0xFF, 0x00])
        #expect(raw?.hasPrefix("ssid=ff00\n") == true, "an SSID that is not text")
        #expect(NetworkIdentity.material(routes: [], ssid: Array("Home".utf8)) == nil, "no default route: no network")
    }

    private typealias Tracker = NetworkIdentity.Tracker

    private func seen(_ family: AddressFamily, _ mac: UInt8?, prefixes: Set<String>? = nil, link: String = "eth0",
                      carrier: UInt32 = 1) -> Tracker.Sighting {
        .init(family: family, anchor: mac.map { .router([2, 0, 0, 0, 0, $0]) },
              prefixes: prefixes ?? [family == .ipv4 ? "192.0.2.0/24" : "2001:db8::/64"],
              segment: .init(link: link, carrierChanges: carrier))
    }

    private func key(_ material: String) -> String { "id(\(material))" }

    @Test("the identity is the network's: stable while its gateways resolve, one family comes and goes, the carrier flaps")
    func trackerSameNetwork() {
        var tracker = Tracker()
        #expect(tracker.identify([seen(.ipv4, nil)], ssid: nil, key: key) == "",
                "first seen, its gateway not resolved yet: not identified yet")
        let home = tracker.identify([seen(.ipv4, 1)], ssid: nil, key: key)
        #expect(home == "id(4 mac=020000000001 prefixes=192.0.2.0/24)")
        #expect(tracker.identify([seen(.ipv4, 1), seen(.ipv6, nil)], ssid: nil, key: key) == home, "IPv6 comes")
        #expect(tracker.identify([seen(.ipv4, 1), seen(.ipv6, 7)], ssid: nil, key: key) == home, "its router resolves")
        #expect(tracker.identify([seen(.ipv6, 7)], ssid: nil, key: key) == home, "IPv4's route goes")
        #expect(tracker.identify([seen(.ipv4, 1), seen(.ipv6, 7)], ssid: nil, key: key) == home, "and comes back")
        #expect(tracker.identify([], ssid: nil, key: key) == "", "no route: no network")
        #expect(tracker.identify([seen(.ipv4, nil, carrier: 3)], ssid: nil, key: key) == home,
                "back after a replug, its gateway flushed with the carrier: nothing says it is another")
        #expect(tracker.identify([seen(.ipv4, 1, carrier: 3)], ssid: nil, key: key) == home, "resolved: the same")
        var fresh = Tracker()
        #expect(fresh.identify([seen(.ipv4, 1), seen(.ipv6, 7)], ssid: nil, key: key) == home,
                "the same network seen afresh has the same identity")
    }

    @Test("another network: another router behind a family's gateway, other prefixes, another SSID, a new segment")
    func trackerAnotherNetwork() {
        var tracker = Tracker()
        let home = tracker.identify([seen(.ipv4, 1)], ssid: nil, key: key)
        #expect(tracker.identify([seen(.ipv4, nil, carrier: 3)], ssid: nil, key: key) == home,
                "replugged, not resolved yet: taken as the same for the moment")
        let other = tracker.identify([seen(.ipv4, 2, carrier: 3)], ssid: nil, key: key)
        #expect(other != home && !other.isEmpty, "resolved to another router")
        #expect(tracker.identify([seen(.ipv4, 1)], ssid: nil, key: key) == home, "back: the first again")
        #expect(tracker.identify([seen(.ipv4, 1, prefixes: ["198.51.100.0/24"])], ssid: nil, key: key) != home,
                "the same router's address on other prefixes")
        var wifi = Tracker()
        let cafe = wifi.identify([seen(.ipv4, 1)], ssid: Array("Cafe".utf8), key: key)
        #expect(wifi.identify([seen(.ipv4, 1)], ssid: Array("Home".utf8), key: key) != cafe, "another SSID")
        var split = Tracker()
        let v4 = split.identify([seen(.ipv4, 1)], ssid: nil, key: key)
        #expect(split.identify([seen(.ipv6, 7)], ssid: nil, key: key) == v4, "the same segment: the same network")
        #expect(split.identify([seen(.ipv6, 8, carrier: 3)], ssid: nil, key: key) != v4,
                "a new segment where nothing known agrees: another")
    }

    @Test("a link without an access point for a moment keeps the SSID it was last seen on; another SSID replaces it")
    func ssidThroughARoam() {
        var ssids = NetworkIdentity.SSIDs()
        let home = Array("Home".utf8), cafe = Array("Cafe".utf8)
        #expect(ssids.ssid(links: ["wlan0"], known: ["wlan0": home]) == home)
        #expect(ssids.ssid(links: ["wlan0"], known: [:]) == home, "between two access points")
        #expect(ssids.ssid(links: ["wlan0"], known: ["wlan0": []]) == home, "a hidden SSID not known yet")
        #expect(ssids.ssid(links: ["wlan0"], known: ["wlan0": cafe]) == cafe)
        #expect(ssids.ssid(links: ["eth0"], known: ["wlan0": cafe]) == nil, "a route through another link")
        #expect(ssids.ssid(links: ["eth0", "wlan0"], known: ["wlan0": home]) == home, "the first link that has one")
        var fresh = NetworkIdentity.SSIDs()
        #expect(fresh.ssid(links: ["wlan0"], known: [:]) == nil, "never seen: none")
        for index in 0..<70 { _ = ssids.ssid(links: [], known: ["wlan\(index)": home]) }
        #expect(ssids.last.count <= 64, "bounded")
    }

    @Test("one reason per evaluation, the weightiest; a flap back to the same network is none")
    func invalidation() {
        typealias O = NetworkIdentity.Observed
        let home = O(identity: "a", sources: ["192.0.2.2"], dns: "nameserver 192.0.2.53")
        #expect(NetworkIdentity.invalidation(from: home, to: home, lastNetwork: "a") == nil)
        var other = home
        other.identity = "b"
        other.sources = ["192.0.2.3"]
        #expect(NetworkIdentity.invalidation(from: home, to: other, lastNetwork: "a") == .networkChanged)
        let gone = O()
        #expect(NetworkIdentity.invalidation(from: home, to: gone, lastNetwork: "a") == nil,
                "no network: its name servers went with it")
        #expect(NetworkIdentity.invalidation(from: NetworkIdentity.carried(from: home, into: gone), to: home,
                                             lastNetwork: "a") == nil,
                "the same network back with its name servers: a flap")
        // NetworkManager's configuration coming back in steps: none, then the same servers.
        let noServers = NetworkIdentity.carried(from: home, into: O(identity: "a", sources: home.sources))
        #expect(NetworkIdentity.invalidation(from: home, to: noServers, lastNetwork: "a") == nil)
        #expect(NetworkIdentity.invalidation(from: noServers, to: home, lastNetwork: "a") == nil)
        #expect(NetworkIdentity.invalidation(from: O(dns: home.dns), to: home, lastNetwork: "a") == nil, "back: a flap")
        #expect(NetworkIdentity.invalidation(from: O(dns: home.dns), to: other, lastNetwork: "a") == .networkChanged,
                "back on another network")
        var vpn = home
        vpn.vpn = "wg0"
        #expect(NetworkIdentity.invalidation(from: home, to: vpn, lastNetwork: "a") == .vpnChanged)
        var source = home
        source.sources = ["192.0.2.9"]
        source.addresses = ["192.0.2.9"]
        #expect(NetworkIdentity.invalidation(from: home, to: source, lastNetwork: "a") == .sourceChanged,
                "the source before gone with it")
        // A privacy address rotating: another preferred source, the older one still on its link.
        var rotated = O(identity: "a", sources: ["2001:db8::b"], addresses: ["2001:db8::a", "2001:db8::b"],
                        dns: home.dns)
        let before = O(identity: "a", sources: ["2001:db8::a"], addresses: ["2001:db8::a"], dns: home.dns)
        #expect(NetworkIdentity.invalidation(from: before, to: rotated, lastNetwork: "a") == nil,
                "the older address still carries its connections")
        rotated = NetworkIdentity.carried(from: before, into: rotated)
        #expect(rotated.inUse == ["2001:db8::b", "2001:db8::a"])
        // Its valid lifetime ends: removed, and the connections made from it with it.
        var expired = O(identity: "a", sources: ["2001:db8::b"], addresses: ["2001:db8::b"], dns: home.dns)
        #expect(NetworkIdentity.invalidation(from: rotated, to: expired, lastNetwork: "a") == .sourceChanged)
        expired = NetworkIdentity.carried(from: rotated, into: expired)
        #expect(expired.inUse == ["2001:db8::b"], "the gone one is no longer in use")
        #expect(NetworkIdentity.invalidation(from: expired, to: expired, lastNetwork: "a") == nil, "once per event")
        var dns = home
        dns.dns = "nameserver 198.51.100.53"
        #expect(NetworkIdentity.invalidation(from: home, to: dns, lastNetwork: "a") == .dnsChanged)
    }
}
