import Testing
@testable import ReachabilityCore

/// Facts for one interface `eth0` (index 2) with the given routes to the internet and device.
private func facts(
    v4: RouteFact? = nil, v6: RouteFact? = nil, device: DeviceFact? = nil,
    link: LinkFact = LinkFact(index: 2, name: "eth0", isUp: true, hasCarrier: true, operState: .up,
                              kernelType: .ethernet, isTunnel: false),
    extraDevices: [DeviceFact] = [], connectivity: Connectivity = .full
) -> NetworkFacts {
    var devices: [String: DeviceFact] = [:]
    for d in [device].compactMap({ $0 }) + extraDevices { devices[d.interface] = d }
    return NetworkFacts(backend: .networkManager, connectivity: connectivity, devices: devices,
                        links: [2: link], internetRoutes: [.ipv4: [v4], .ipv6: [v6]])
}

private let viaGateway = RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 2)
private let onLink = RouteFact(kind: .unicast, hasGateway: false, interfaceIndex: 2)
private let local = RouteFact(kind: .local, hasGateway: false, interfaceIndex: 2)
private let ethernet = DeviceFact(interface: "eth0", type: .ethernet, activity: .activated,
                                  connectivityIPv4: .full, connectivityIPv6: .full)

@Suite("Flag derivation, one test per row of the specification's table")
struct EngineRowTests {
    @Test("local route: Reachable, IsLocalAddress, IsDirect")
    func localRoute() {
        let path = Engine.evaluatePath(family: .ipv4, route: local, facts: facts())
        #expect(path.flags == [.reachable, .isLocalAddress, .isDirect])
    }

    @Test("on-link unicast route: Reachable, IsDirect")
    func onLinkRoute() {
        let path = Engine.evaluatePath(family: .ipv4, route: onLink, facts: facts(device: ethernet))
        #expect(path.flags == [.reachable, .isDirect])
        #expect(path.interface == "eth0")
        #expect(path.interfaceType == .ethernet)
    }

    @Test("a link-local IPv6 address without its scope: nothing, whatever route the kernel shows")
    func unscopedLinkLocal() {
        let v6Link = LinkFact(index: 2, name: "eth0", isUp: true, hasCarrier: true, operState: .up,
                              kernelType: .ethernet, isTunnel: false)
        let unscoped = Engine.evaluatePath(family: .ipv6, route: onLink, facts: facts(device: ethernet, link: v6Link),
                                           destination: "fe80::1")
        #expect(unscoped.flags == [])
        #expect(unscoped.cause?.reason == .noRoute)
        #expect(unscoped.cause?.detail == "no route a socket can take to fe80::1: "
                + "a link-local address needs its link (fe80::1%INTERFACE)")
        let scoped = Engine.evaluatePath(family: .ipv6, route: onLink, facts: facts(device: ethernet, link: v6Link),
                                         destination: "fe80::1%eth0")
        #expect(scoped.flags.contains(.reachable))
        #expect(AddressText.isUnscopedIPv6LinkLocal("febf::1") && !AddressText.isUnscopedIPv6LinkLocal("fec0::1"))
        #expect(!AddressText.isUnscopedIPv6LinkLocal("169.254.1.1") && !AddressText.isUnscopedIPv6LinkLocal("2001:db8::1"))
    }

    @Test("unicast route via a gateway: Reachable")
    func gatewayRoute() {
        let path = Engine.evaluatePath(family: .ipv4, route: viaGateway, facts: facts(device: ethernet))
        #expect(path.flags == .reachable)
    }

    @Test("no route, unusable route types, or a link that cannot carry packets: nothing",
          arguments: [
            (nil as RouteFact?, true, true, LinkFact.OperState.up),
            (RouteFact(kind: .unusable, hasGateway: false, interfaceIndex: 2), true, true, .up),
            (viaGateway, false, true, .up),  // not IFF_UP
            (viaGateway, true, false, .up),  // no carrier
            (viaGateway, true, true, .down),  // operstate down
            (RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 99), true, true, .up),  // unknown link
          ])
    func notReachable(route: RouteFact?, up: Bool, carrier: Bool, oper: LinkFact.OperState) {
        let link = LinkFact(index: 2, name: "eth0", isUp: up, hasCarrier: carrier, operState: oper,
                            kernelType: .ethernet, isTunnel: false)
        let path = Engine.evaluatePath(family: .ipv4, route: route, facts: facts(device: ethernet, link: link))
        #expect(path.flags == [])
        #expect(path.interface == "")
    }

    @Test("operstate unknown (loopback, tun) still carries packets")
    func operStateUnknown() {
        let link = LinkFact(index: 2, name: "eth0", isUp: true, hasCarrier: true, operState: .unknown,
                            kernelType: .ethernet, isTunnel: false)
        #expect(Engine.evaluatePath(family: .ipv4, route: viaGateway, facts: facts(link: link)).flags == .reachable)
    }

    @Test("a WWAN device adds IsWWAN and gives status 1")
    func wwan() {
        let modem = DeviceFact(interface: "eth0", type: .wwan, activity: .activated, isMetered: true)
        let state = Engine.evaluateInternet(facts(v4: viaGateway, device: modem))
        #expect(state.flags == [.reachable, .isWWAN])
        #expect(state.status == .reachableViaWWAN)
        #expect(state.isReachableViaWWAN)
        #expect(state.isMetered)
    }

    @Test("a VPN device or a tunnel link adds TransientConnection")
    func vpn() {
        let vpnDevice = DeviceFact(interface: "eth0", type: .other, activity: .activated, isVPN: true)
        #expect(Engine.evaluatePath(family: .ipv4, route: viaGateway, facts: facts(device: vpnDevice)).flags
                == [.reachable, .transientConnection])
        let tun = LinkFact(index: 2, name: "eth0", isUp: true, hasCarrier: true, operState: .unknown,
                           kernelType: .other, isTunnel: true)
        let state = Engine.evaluateInternet(facts(v4: onLink, link: tun))
        #expect(state.flags == [.reachable, .transientConnection])
        #expect(state.isVPN)
        #expect(state.status == .reachableViaWiFi)
    }

    @Test("portal on a gatewayed path: ConnectionRequired and InterventionRequired, not reachable")
    func portal() {
        let device = DeviceFact(interface: "eth0", type: .ethernet, activity: .activated,
                                connectivityIPv4: .portal, connectivityIPv6: .portal)
        let state = Engine.evaluateInternet(facts(v4: viaGateway, device: device, connectivity: .portal))
        #expect(state.flags == [.reachable, .connectionRequired, .interventionRequired])
        #expect(state.status == .notReachable)
        #expect(state.connectivity == .portal)
        #expect(state.isConnectionRequired)
        // On-link destinations do not pass through the portal.
        #expect(Engine.evaluatePath(family: .ipv4, route: onLink, facts: facts(device: device)).flags
                == [.reachable, .isDirect])
    }

    @Test("limited connectivity keeps Reachable")
    func limited() {
        let device = DeviceFact(interface: "eth0", type: .ethernet, activity: .activated,
                                connectivityIPv4: .limited)
        let state = Engine.evaluateInternet(facts(v4: viaGateway, device: device, connectivity: .limited))
        #expect(state.flags == .reachable)
        #expect(state.connectivity == .limited)
        #expect(state.status == .reachableViaWiFi)
    }

    @Test("no usable route while NetworkManager activates: ConnectionRequired")
    func activating() {
        let device = DeviceFact(interface: "eth0", type: .ethernet, activity: .activating)
        let state = Engine.evaluateInternet(facts(device: device))
        #expect(state.flags == .connectionRequired)
        #expect(state.status == .notReachable)
    }

    @Test("no usable route while a device waits for secrets: ConnectionRequired, InterventionRequired")
    func needAuth() {
        let wifi = DeviceFact(interface: "wlan0", type: .wifi, activity: .needsAuthentication)
        let other = DeviceFact(interface: "eth1", type: .ethernet, activity: .activating)
        let state = Engine.evaluateInternet(facts(device: wifi, extraDevices: [other]))
        #expect(state.flags == [.connectionRequired, .interventionRequired])
    }

    @Test("activation flags are not added when something is reachable")
    func activationIgnoredWhenReachable() {
        let other = DeviceFact(interface: "wlan0", type: .wifi, activity: .activating)
        let state = Engine.evaluateInternet(facts(v4: viaGateway, device: ethernet, extraDevices: [other]))
        #expect(state.flags == .reachable)
    }
}

@Suite("The internet target")
struct InternetTargetTests {
    @Test("never carries IsDirect or IsLocalAddress")
    func noDirect() {
        #expect(Engine.evaluateInternet(facts(v4: onLink, device: ethernet)).flags == .reachable)
        #expect(Engine.evaluateInternet(facts(v4: local, device: ethernet)).flags == .reachable)
    }

    @Test("both families reported; the interface and type of the winning path")
    func families() {
        let state = Engine.evaluateInternet(facts(v4: viaGateway, v6: viaGateway, device: ethernet))
        #expect(state.reachableIPv4 && state.reachableIPv6)
        #expect(state.interface == "eth0")
        #expect(state.interfaceType == .ethernet)
        #expect(state.isReachableViaEthernet && !state.isReachableViaWiFi && !state.isReachableViaWWAN)
        #expect(state.connectivity == .full)
        #expect(state.addresses == [])
        let v6only = Engine.evaluateInternet(facts(v6: viaGateway, device: ethernet))
        #expect(!v6only.reachableIPv4 && v6only.reachableIPv6)
        #expect(v6only.flags == .reachable)
    }

    @Test("no backend: unknown, Status -1, Flags 0")
    func unknown() {
        let state = Engine.evaluateInternet(.unknown)
        #expect(state.flags == nil)
        #expect(state.status == .unknown)
        #expect(state.exportedFlags == [])
        #expect(!state.isReachable)
    }

    @Test("an interface NetworkManager does not type gets the kernel's type")
    func kernelType() {
        let wlan = LinkFact(index: 2, name: "eth0", isUp: true, hasCarrier: true, operState: .up,
                            kernelType: .wifi, isTunnel: false)
        #expect(Engine.evaluateInternet(facts(v4: viaGateway, link: wlan)).interfaceType == .wifi)
        let generic = DeviceFact(interface: "eth0", type: .other, activity: .activated)
        #expect(Engine.evaluateInternet(facts(v4: viaGateway, device: generic, link: wlan)).interfaceType == .wifi)
    }
}

@Suite("The internet's path from the kernel's answers for several destinations")
struct InternetPathTests {
    private static let eth0 = LinkFact(index: 2, name: "eth0", isUp: true, hasCarrier: true, operState: .up,
                                       kernelType: .ethernet, isTunnel: false)
    private static let wg0 = LinkFact(index: 3, name: "wg0", isUp: true, hasCarrier: true, operState: .unknown,
                                      kernelType: .other, isTunnel: true)
    private static let eth1 = LinkFact(index: 4, name: "eth1", isUp: true, hasCarrier: false, operState: .down,
                                       kernelType: .ethernet, isTunnel: false)
    private static let viaEth0 = RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 2)
    private static let viaWg0 = RouteFact(kind: .unicast, hasGateway: false, interfaceIndex: 3)
    private static let viaEth1 = RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 4)

    private func facts(_ v4: [RouteFact?], _ v6: [RouteFact?] = [], connectivity: Connectivity = .unknown)
        -> NetworkFacts
    {
        NetworkFacts(backend: .kernel, connectivity: connectivity,
                     links: [2: Self.eth0, 3: Self.wg0, 4: Self.eth1], internetRoutes: [.ipv4: v4, .ipv6: v6])
    }

    @Test("a split tunnel that covers one destination does not speak for the internet")
    func splitTunnel() {
        let state = Engine.evaluateInternet(facts([Self.viaWg0, Self.viaEth0, Self.viaEth0]))
        #expect(state.interface == "eth0")
        #expect(!state.isVPN)
        #expect(state.flags == .reachable)
    }

    @Test("a full tunnel covers every destination: the VPN, without IsDirect")
    func fullTunnel() {
        let state = Engine.evaluateInternet(facts([Self.viaWg0, Self.viaWg0, Self.viaWg0]))
        #expect(state.interface == "wg0")
        #expect(state.isVPN)
        #expect(state.flags == [.reachable, .transientConnection])
    }

    @Test("a usable answer outranks answers through a dead link; ties go to the first destination")
    func rankFirst() {
        let state = Engine.evaluateInternet(facts([Self.viaEth1, nil, Self.viaEth0]))
        #expect(state.interface == "eth0")
        #expect(state.flags == .reachable)
        #expect(Engine.internetPath(family: .ipv4, facts: facts([Self.viaWg0, Self.viaEth0])).interface == "wg0")
        #expect(Engine.internetPath(family: .ipv4, facts: facts([Self.viaEth1, nil])).flags == [])
    }

    @Test("no answer at all (no route, reject routes): not reachable, no interface")
    func noRoute() {
        let unusable = RouteFact(kind: .unusable, hasGateway: false, interfaceIndex: 1)
        let state = Engine.evaluateInternet(facts([nil, unusable, nil]))
        #expect(state.flags == [])
        #expect(state.interface == "")
        #expect(!state.reachableIPv4 && !state.reachableIPv6)
    }

    @Test("IPv6 only: reachable through IPv6 alone")
    func ipv6Only() {
        let state = Engine.evaluateInternet(facts([nil, nil, nil], [Self.viaEth0, Self.viaEth0, Self.viaEth0]))
        #expect(state.flags == .reachable)
        #expect(!state.reachableIPv4 && state.reachableIPv6)
        #expect(state.interface == "eth0")
    }
}

@Suite("A tunnel needs an underlay")
struct UnderlayTests {
    private static let eth0 = LinkFact(index: 2, name: "eth0", isUp: true, hasCarrier: true, operState: .up,
                                       kernelType: .ethernet, isTunnel: false)
    private static let tun0 = LinkFact(index: 3, name: "tun0", isUp: true, hasCarrier: true, operState: .unknown,
                                       kernelType: .other, isTunnel: true)
    private static let viaTun = RouteFact(kind: .unicast, hasGateway: false, interfaceIndex: 3)
    private static let viaEth0 = RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 2)

    private static let ppp0 = LinkFact(index: 4, name: "ppp0", isUp: true, hasCarrier: true, operState: .unknown,
                                       kernelType: .wwan, isTunnel: false, isPointToPoint: true)

    private func facts(underlay: Set<Int32>?, eth0: LinkFact = eth0) -> NetworkFacts {
        NetworkFacts(backend: .kernel, links: [2: eth0, 3: Self.tun0, 4: Self.ppp0],
                     internetRoutes: [.ipv4: [Self.viaTun, Self.viaTun, Self.viaTun]], underlayLinks: underlay)
    }

    @Test("a full tunnel over a link with a route off it (a default route, or openconnect's host route to the VPN server), or a point-to-point link with a route: reachable, TransientConnection, Vpn",
          arguments: [[2], [2, 3], [4]] as [Set<Int32>])
    func withUnderlay(underlay: Set<Int32>) {
        let state = Engine.evaluateInternet(facts(underlay: underlay))
        #expect(state.flags == [.reachable, .transientConnection])
        #expect(state.isVPN && state.interface == "tun0")
    }

    @Test("no link outside the tunnel with a route off it (none, only the tunnel's own, an unknown link): not reachable",
          arguments: [[], [3], [9]] as [Set<Int32>])
    func withoutUnderlay(underlay: Set<Int32>) {
        let state = Engine.evaluateInternet(facts(underlay: underlay))
        #expect(state.flags == [])
        #expect(!state.isVPN && state.interface == "")
        #expect(Engine.evaluatePath(family: .ipv4, route: Self.viaTun, facts: facts(underlay: underlay)).flags == [])
    }

    @Test("the Wi-Fi under a full tunnel went away: not reachable, though the tunnel's route stands")
    func underlayLostCarrier() {
        let dead = LinkFact(index: 2, name: "eth0", isUp: true, hasCarrier: false, operState: .down,
                            kernelType: .ethernet, isTunnel: false)
        #expect(Engine.evaluateInternet(facts(underlay: [2], eth0: dead)).flags == [])
    }

    @Test("not asked (nil): the rule is not applied")
    func notAsked() {
        #expect(Engine.evaluateInternet(facts(underlay: nil)).flags == [.reachable, .transientConnection])
    }
}

@Suite("Captive portal on the internet target, one story")
struct InternetPortalTests {
    private static let eth0 = LinkFact(index: 2, name: "eth0", isUp: true, hasCarrier: true, operState: .up,
                                       kernelType: .ethernet, isTunnel: false)
    private static let route = RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 2)

    private func facts(global: Connectivity, v4: Connectivity, v6: Connectivity) -> NetworkFacts {
        let device = DeviceFact(interface: "eth0", type: .ethernet, activity: .activated,
                                connectivityIPv4: v4, connectivityIPv6: v6)
        return NetworkFacts(backend: .networkManager, connectivity: global, devices: ["eth0": device],
                            links: [2: Self.eth0], internetRoutes: [.ipv4: [Self.route], .ipv6: [Self.route]])
    }

    @Test("global portal: ConnectionRequired|InterventionRequired, Status 0, whichever family ranks best",
          arguments: [(Connectivity.portal, Connectivity.limited), (.limited, .portal), (.full, .full),
                      (.portal, .portal), (.unknown, .unknown)])
    func globalPortal(v4: Connectivity, v6: Connectivity) {
        let state = Engine.evaluateInternet(facts(global: .portal, v4: v4, v6: v6))
        #expect(state.flags == [.reachable, .connectionRequired, .interventionRequired])
        #expect(state.status == .notReachable)
        #expect(state.connectivity == .portal)
        #expect(!state.isReachable && !state.reachableIPv4 && !state.reachableIPv6)
    }

    @Test("global portal without any route: still ConnectionRequired|InterventionRequired, Status 0")
    func portalWithoutRoute() {
        var facts = facts(global: .portal, v4: .portal, v6: .portal)
        facts.internetRoutes = [.ipv4: [nil], .ipv6: [nil]]
        let state = Engine.evaluateInternet(facts)
        #expect(state.flags == [.connectionRequired, .interventionRequired])
        #expect(state.status == .notReachable)
        #expect(state.connectivity == .portal)
    }

    @Test("not portal globally: a family behind a portal loses to one that is not")
    func otherFamilyWins() {
        let state = Engine.evaluateInternet(facts(global: .limited, v4: .portal, v6: .limited))
        #expect(state.flags == .reachable)
        #expect(state.status == .reachableViaWiFi)
        #expect(state.connectivity == .limited)
        #expect(!state.reachableIPv4 && state.reachableIPv6)
    }
}

@Suite("Ranking")
struct RankingTests {
    private func path(_ family: AddressFamily, _ flags: ReachabilityFlags, _ name: String) -> Engine.Path {
        Engine.Path(family: family, flags: flags, interface: name, interfaceType: .ethernet,
                    connectivity: .unknown, isMetered: false, isVPN: false)
    }

    @Test("Reachable beats Reachable+ConnectionRequired beats not reachable; ties keep the first")
    func ranking() {
        let a = path(.ipv4, [], "a")
        let b = path(.ipv4, [.reachable, .connectionRequired], "b")
        let c = path(.ipv6, .reachable, "c")
        let d = path(.ipv6, .reachable, "d")
        #expect(Engine.choose([a, b, c, d])?.interface == "c")
        #expect(Engine.choose([a, b])?.interface == "b")
        #expect(Engine.choose([a])?.interface == "a")
        #expect(Engine.choose([]) == nil)
    }
}

@Suite("AFNetworking's status rule")
struct StatusTests {
    static let cases: [(ReachabilityFlags, ReachabilityStatus)] = [
        (ReachabilityFlags(), ReachabilityStatus.notReachable),
        (.reachable, .reachableViaWiFi),
        ([.reachable, .isWWAN], .reachableViaWWAN),
        ([.reachable, .isDirect, .isLocalAddress], .reachableViaWiFi),
        ([.reachable, .connectionRequired], .notReachable),
        ([.reachable, .connectionRequired, .connectionOnDemand], .reachableViaWiFi),
        ([.reachable, .connectionRequired, .connectionOnTraffic], .reachableViaWiFi),
        ([.reachable, .connectionRequired, .connectionOnTraffic, .isWWAN], .reachableViaWWAN),
        ([.reachable, .connectionRequired, .connectionOnDemand, .interventionRequired], .notReachable),
        ([.reachable, .connectionRequired, .interventionRequired], .notReachable),
        ([.connectionRequired], .notReachable),
        ([.isWWAN], .notReachable),
        ([.reachable, .transientConnection], .reachableViaWiFi),
    ]

    @Test("status from flags", arguments: cases)
    func rule(flags: ReachabilityFlags, expected: ReachabilityStatus) {
        #expect(ReachabilityStatus(flags: flags) == expected)
    }

    @Test("bit values are Apple's")
    func bits() {
        #expect(ReachabilityFlags.transientConnection.rawValue == 1)
        #expect(ReachabilityFlags.reachable.rawValue == 2)
        #expect(ReachabilityFlags.connectionRequired.rawValue == 4)
        #expect(ReachabilityFlags.connectionOnTraffic.rawValue == 8)
        #expect(ReachabilityFlags.interventionRequired.rawValue == 16)
        #expect(ReachabilityFlags.connectionOnDemand.rawValue == 32)
        #expect(ReachabilityFlags.isLocalAddress.rawValue == 65536)
        #expect(ReachabilityFlags.isDirect.rawValue == 131072)
        #expect(ReachabilityFlags.isWWAN.rawValue == 262144)
        #expect(ReachabilityFlags([.reachable, .isDirect]).description == "Reachable,Directly Reachable Address")
        #expect(ReachabilityFlags().description == "Not Reachable")
    }
}

@Suite("Object path escaping (sd_bus_path_encode)")
struct PathEscapingTests {
    @Test("known pairs", arguments: [
        ("example.com", "example_2ecom"),
        ("127.0.0.1", "_3127_2e0_2e0_2e1"),
        ("", "_"),
        ("a", "a"),
        ("1a", "_31a"),
        ("a1", "a1"),
        ("fe80::1%eth0", "fe80_3a_3a1_25eth0"),
        ("my_host-1", "my_5fhost_2d1"),
        ("é", "_c3_a9"),
    ])
    func pairs(input: String, escaped: String) {
        #expect(PathEscaping.escapeLabel(input) == escaped)
        #expect(PathEscaping.unescapeLabel(escaped) == input)
    }

    @Test("invalid escapes are rejected")
    func invalid() {
        #expect(PathEscaping.unescapeLabel("_zz") == nil)
        #expect(PathEscaping.unescapeLabel("_3") == nil)
    }
}
