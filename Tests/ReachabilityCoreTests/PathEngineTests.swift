import Testing
@testable import ReachabilityCore

/// A link that can carry packets unless told otherwise.
private func link(_ index: Int32, _ name: String, type: InterfaceType = .ethernet, tunnel: Bool = false,
                  carrier: Bool = true) -> LinkFact {
    LinkFact(index: index, name: name, isUp: true, hasCarrier: carrier, operState: carrier ? .up : .down,
             kernelType: type, isTunnel: tunnel)
}

private func via(_ index: Int32, _ gateway: String?, metric: UInt32 = 100) -> RouteFact {
    RouteFact(kind: .unicast, hasGateway: gateway != nil, interfaceIndex: index, gateway: gateway, metric: metric)
}

private let lo = link(1, "lo", type: .loopback)
private let eth0 = link(2, "eth0")
private let wlan0 = link(3, "wlan0", type: .wifi)
private let wwan0 = link(4, "wwan0", type: .wwan)
private let tun0 = link(5, "tun0", type: .other, tunnel: true)

/// Facts whose internet routes are the given per-family answers (each asked three times, as the evaluator does).
private func facts(_ links: [LinkFact], v4: RouteFact? = nil, v6: RouteFact? = nil, devices: [DeviceFact] = [],
                   backend: BackendKind = .kernel) -> NetworkFacts {
    NetworkFacts(backend: backend, devices: Dictionary(uniqueKeysWithValues: devices.map { ($0.interface, $0) }),
                 links: Dictionary(uniqueKeysWithValues: links.map { ($0.index, $0) }),
                 internetRoutes: [.ipv4: [v4, v4, v4], .ipv6: [v6, v6, v6]])
}

@Suite("Path facts per interface (Engine.evaluatePaths)")
struct PathEngineTests {
    @Test("no backend: nothing known")
    func noBackend() {
        let state = Engine.evaluatePaths(.unknown, bound: [:], dnsConfigured: true)
        #expect(state == .none)
    }

    @Test("one uplink: listed with its gateway, loopback never; Flags are the internet's")
    func oneUplink() {
        let route = via(2, "192.0.2.1")
        let state = Engine.evaluatePaths(facts([lo, eth0], v4: route), bound: [2: .init(ipv4: route)],
                                         dnsConfigured: true)
        #expect(state.interfaces == [PathInterface(name: "eth0", index: 2, type: .ethernet, usableIPv4: true,
                                                   gateways: ["192.0.2.1"])])
        #expect(state.flags == .reachable)
        #expect(state.dnsConfigured)
        #expect(!state.isExpensive && !state.isConstrained)
    }

    @Test("order: the internet's interface, the other family's, the usable by metric, the unusable by index")
    func order() {
        let links = [eth0, wlan0, wwan0, link(6, "eth1"), link(7, "eth2")]
        let bound: [Int32: Engine.BoundRoutes] = [
            2: .init(ipv6: via(2, "2001:db8::1", metric: 10)),
            3: .init(ipv4: via(3, "192.0.2.1", metric: 600)),
            4: .init(ipv4: via(4, nil, metric: 700)),
            6: .init(ipv4: via(6, "198.51.100.1", metric: 650)),
        ]
        let state = Engine.evaluatePaths(
            facts(links, v4: via(3, "192.0.2.1", metric: 600), v6: via(2, "2001:db8::1", metric: 10)),
            bound: bound, dnsConfigured: false)
        // The internet target prefers IPv4 on ties (the first family ranked best): wlan0.
        #expect(state.interfaces.map(\.name) == ["wlan0", "eth0", "eth1", "wwan0", "eth2"])
        #expect(state.interfaces.map(\.isUsable) == [true, true, true, true, false])
        #expect(state.interfaces[1].usableIPv6 && !state.interfaces[1].usableIPv4)
        #expect(state.interfaces[3].gateways == [], "on-link: no gateway")
    }

    @Test("gateways: IPv4 first, each once")
    func gateways() {
        let bound: [Int32: Engine.BoundRoutes] = [2: .init(ipv4: via(2, "192.0.2.1"), ipv6: via(2, "fe80::1"))]
        let state = Engine.evaluatePaths(facts([eth0], v4: via(2, "192.0.2.1"), v6: via(2, "fe80::1")),
                                         bound: bound, dnsConfigured: false)
        #expect(state.interfaces[0].gateways == ["192.0.2.1", "fe80::1"])
        let same: [Int32: Engine.BoundRoutes] = [2: .init(ipv4: via(2, "fe80::1"), ipv6: via(2, "fe80::1"))]
        let internet = facts([eth0], v4: via(2, "fe80::1"), v6: via(2, "fe80::1"))
        #expect(Engine.evaluatePaths(internet, bound: same, dnsConfigured: false).interfaces[0].gateways
                == ["fe80::1"])
    }

    @Test("no carrier, an unusable route or none: not usable, no gateway")
    func unusable() {
        let down = link(2, "eth0", carrier: false)
        let route = via(2, "192.0.2.1")
        #expect(!Engine.evaluatePaths(facts([down], v4: route), bound: [2: .init(ipv4: route)], dnsConfigured: false)
                .interfaces[0].isUsable)
        let blackhole = RouteFact(kind: .unusable, hasGateway: false, interfaceIndex: 2)
        let state = Engine.evaluatePaths(facts([eth0]), bound: [2: .init(ipv4: blackhole)], dnsConfigured: false)
        #expect(state.interfaces == [PathInterface(name: "eth0", index: 2, type: .ethernet)])
    }

    @Test("a tunnel: a VPN, usable only with an underlay")
    func tunnel() {
        let tunRoute = via(5, nil, metric: 20)
        var withUnderlay = facts([eth0, tun0], v4: tunRoute)
        withUnderlay.underlayLinks = [2]
        let bound: [Int32: Engine.BoundRoutes] = [2: .init(ipv4: via(2, "192.0.2.1")), 5: .init(ipv4: tunRoute)]
        let state = Engine.evaluatePaths(withUnderlay, bound: bound, dnsConfigured: false)
        #expect(state.interfaces.map(\.name) == ["tun0", "eth0"])
        #expect(state.interfaces[0].isVPN && state.interfaces[0].usableIPv4 && state.interfaces[0].type == .other)
        #expect(state.flags == [.reachable, .transientConnection])

        var noUnderlay = withUnderlay
        noUnderlay.links[2] = link(2, "eth0", carrier: false)
        noUnderlay.underlayLinks = []
        let lost = Engine.evaluatePaths(noUnderlay, bound: bound, dnsConfigured: false)
        #expect(lost.interfaces.allSatisfy { !$0.isUsable })
        #expect(lost.flags == [])
    }

    @Test("NetworkManager's device type wins over the kernel's; expensive and constrained from the preferred")
    func networkManagerFacts() {
        let route = via(2, "192.0.2.1")
        let metered = DeviceFact(interface: "eth0", type: .wifi, activity: .activated, isMetered: true)
        var state = Engine.evaluatePaths(facts([eth0], v4: route, devices: [metered], backend: .networkManager),
                                         bound: [2: .init(ipv4: route)], dnsConfigured: true)
        #expect(state.interfaces[0].type == .wifi)
        #expect(state.isExpensive && !state.isConstrained)

        let byUser = DeviceFact(interface: "eth0", type: .ethernet, activity: .activated, isMeteredByUser: true)
        state = Engine.evaluatePaths(facts([eth0], v4: route, devices: [byUser], backend: .networkManager),
                                     bound: [2: .init(ipv4: route)], dnsConfigured: true)
        #expect(state.isExpensive && state.isConstrained)

        let modemRoute = via(4, nil)
        state = Engine.evaluatePaths(facts([wwan0], v4: modemRoute), bound: [4: .init(ipv4: modemRoute)],
                                     dnsConfigured: true)
        #expect(state.isExpensive && !state.isConstrained, "a modem is expensive")
        #expect(state.flags == [.reachable, .isWWAN])

        // Not usable: neither expensive nor constrained, whatever the device says.
        state = Engine.evaluatePaths(facts([eth0], devices: [byUser], backend: .networkManager), bound: [:],
                                     dnsConfigured: true)
        #expect(!state.isExpensive && !state.isConstrained)
    }

    @Test("the resolver file names a server", arguments: [
        ("nameserver 192.0.2.1\n", true),
        ("search example.com\n\tnameserver\t::1", true),
        ("# nameserver 192.0.2.1\n; nameserver ::1\n", false),
        ("nameserver\n", false),
        ("options ndots:1\n", false),
        ("", false),
    ])
    func nameServer(text: String, expected: Bool) {
        #expect(Engine.hasNameServer(resolverConfiguration: text) == expected)
    }
}
