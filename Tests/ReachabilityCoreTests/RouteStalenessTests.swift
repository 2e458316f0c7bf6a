import Testing

@testable import ReachabilityCore

/// The classifier of kernel events (which make which cached answers stale), and
/// the engine's rules for the cases that events alone never told.
@Suite("Which kernel events make which answers stale")
struct RouteStalenessTests {
    private func seeded() -> StalenessClassifier {
        var classifier = StalenessClassifier()
        classifier.seed(links: [(2, true, true), (3, true, true)])
        return classifier
    }

    @Test("routes, rules, next hops, addresses and lost events: every answer")
    func routing() {
        var classifier = seeded()
        #expect(classifier.classify(.routing) == RouteInvalidation(all: true))
        #expect(classifier.classify(.lost) == RouteInvalidation(all: true))
    }

    @Test("a carrier lost or back, a link down or up: every answer (the kernel flushes and revives next hops silently)")
    func carrier() {
        var classifier = seeded()
        #expect(classifier.classify(.link(index: 2, isUp: true, hasCarrier: false)) == RouteInvalidation(all: true))
        #expect(classifier.classify(.link(index: 2, isUp: true, hasCarrier: false)).isEmpty, "nothing changed")
        #expect(classifier.classify(.link(index: 2, isUp: true, hasCarrier: true)) == RouteInvalidation(all: true))
        #expect(classifier.classify(.link(index: 3, isUp: false, hasCarrier: false)) == RouteInvalidation(all: true))
        #expect(classifier.classify(.link(index: 3, isUp: true, hasCarrier: true)) == RouteInvalidation(all: true))
        // What rules select a link by: its group, name or master, changed alone.
        let eth = LinkSelectors(name: "eth0")
        #expect(classifier.classify(.link(index: 3, isUp: true, hasCarrier: true, selectors: eth)).isEmpty, "first told")
        var grouped = eth
        grouped.group = 5
        #expect(classifier.classify(.link(index: 3, isUp: true, hasCarrier: true, selectors: grouped)).all)
        #expect(classifier.classify(.link(index: 3, isUp: true, hasCarrier: true, selectors: grouped)).isEmpty)
        #expect(classifier.classify(.link(index: 3, isUp: true, hasCarrier: true,
                                          selectors: LinkSelectors(name: "wan0", group: 5))).all, "renamed")
        #expect(classifier.classify(.link(index: 3, isUp: true, hasCarrier: true)).isEmpty, "not told: not compared")
        // ARP switched off, then on: next hops stop, then start, being resolved.
        #expect(classifier.classify(.link(index: 3, isUp: true, hasCarrier: true, hasNoARP: false)).isEmpty, "first told")
        #expect(classifier.classify(.link(index: 3, isUp: true, hasCarrier: true, hasNoARP: true)).all)
        #expect(classifier.classify(.link(index: 3, isUp: true, hasCarrier: true, hasNoARP: true)).isEmpty)
        #expect(classifier.classify(.link(index: 3, isUp: true, hasCarrier: true, hasNoARP: false)).all)
    }

    @Test("a new link, a removed link: the answers through it")
    func newAndRemoved() {
        var classifier = seeded()
        #expect(classifier.classify(.link(index: 7, isUp: false, hasCarrier: false)) == RouteInvalidation(links: [7]))
        #expect(classifier.classify(.linkRemoved(index: 3)) == RouteInvalidation(links: [3]))
        #expect(classifier.classify(.link(index: 3, isUp: true, hasCarrier: true)) == RouteInvalidation(links: [3]))
    }

    @Test("a followed gateway's neighbour state: every answer when its class changes; others: nothing, counted")
    func neighbours() {
        var classifier = seeded()
        classifier.follow(gateways: ["192.0.2.1"])
        #expect(classifier.classify(.neighbour(address: "192.0.2.1", state: .reachable)) == RouteInvalidation(all: true))
        #expect(classifier.classify(.neighbour(address: "192.0.2.1", state: .reachable)).isEmpty)
        #expect(classifier.classify(.neighbour(address: "192.0.2.1", state: .failed)) == RouteInvalidation(all: true))
        for i in 0..<1000 {
            #expect(classifier.classify(.neighbour(address: "198.51.100.\(i % 250)", state: .failed)).isEmpty)
        }
        #expect(classifier.ignoredNeighbourEvents == 1000)
        // A gateway an answer left stays followed: it can come back.
        classifier.follow(gateways: ["192.0.2.9"])
        #expect(classifier.classify(.neighbour(address: "192.0.2.1", state: .reachable)) == RouteInvalidation(all: true))
    }

    @Test("NUD bits: reachable, valid (stale, delay, probe, permanent, noarp), incomplete, failed, none")
    func nudClasses() {
        #expect(NeighbourState(nud: 0x02) == .reachable)
        #expect([0x04, 0x08, 0x10, 0x40, 0x80].allSatisfy { NeighbourState(nud: $0) == .valid })
        #expect(NeighbourState(nud: 0x01) == .incomplete)
        #expect(NeighbourState(nud: 0x20) == .failed)
        #expect(NeighbourState(nud: 0x00) == .absent)
    }

    @Test("ignore_routes_with_linkdown switched: every answer; any other device setting: nothing")
    func deviceConfiguration() {
        var classifier = seeded()
        #expect(classifier.classify(.deviceConfiguration(ignoresLinkdownRoutes: true)) == RouteInvalidation(all: true))
        #expect(classifier.classify(.deviceConfiguration(ignoresLinkdownRoutes: false)).isEmpty)
        #expect(!KernelEvent.deviceConfiguration(ignoresLinkdownRoutes: false).changesFacts)
        #expect(!KernelEvent.neighbour(address: "192.0.2.1", state: .failed).changesFacts)
        #expect(KernelEvent.link(index: 2, isUp: true, hasCarrier: true).changesFacts)
    }

    @Test("the followed gateways are bounded")
    func bounded() {
        var classifier = seeded()
        classifier.follow(gateways: Set((0..<StalenessClassifier.followedLimit).map { "10.0.\($0 / 256).\($0 % 256)" }))
        classifier.follow(gateways: ["192.0.2.1"])
        #expect(classifier.gateways.count == 1)
    }
}

@Suite("The internet's path per family, one answer for both objects")
struct InternetMajorityTests {
    private static let eth0 = LinkFact(index: 2, name: "eth0", isUp: true, hasCarrier: true, operState: .up,
                                       kernelType: .ethernet, isTunnel: false)
    private static let eth1 = LinkFact(index: 4, name: "eth1", isUp: true, hasCarrier: true, operState: .up,
                                       kernelType: .ethernet, isTunnel: false)
    private static let via0 = RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 2, gateway: "192.0.2.1")
    private static let via1 = RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 4, gateway: "198.51.100.1")

    private func facts(_ v4: [RouteFact?], eth1: LinkFact = eth1) -> NetworkFacts {
        NetworkFacts(backend: .kernel, links: [2: Self.eth0, 4: eth1], internetRoutes: [.ipv4: v4, .ipv6: [nil, nil, nil]])
    }

    @Test("one destination covered by a host route, no default route: not reachable (a lab route does not decide)")
    func oneProbe() {
        let state = Engine.evaluateInternet(facts([Self.via0, nil, nil]))
        #expect(state.flags == [] && !state.reachableIPv4)
        let path = Engine.evaluatePaths(facts([Self.via0, nil, nil]), bound: [2: .init(ipv4: Self.via0)],
                                        dnsConfigured: true)
        #expect(path.interfaces.allSatisfy { !$0.isUsable }, "the path agrees")
        #expect(Engine.evaluateInternet(facts([Self.via0, Self.via0, nil])).reachableIPv4, "two of three decide")
    }

    @Test("a link the bound lookup finds a route through, while the family's internet answer is none: not usable")
    func pathFollowsTarget() {
        // A rule after the main table sends the family's packets elsewhere; the bound lookup still matches eth1.
        let lost = Engine.evaluatePaths(facts([nil, nil, nil]), bound: [4: .init(ipv4: Self.via1)], dnsConfigured: true)
        #expect(lost.interfaces.allSatisfy { !$0.usableIPv4 })
        // Two uplinks, eth1 without carrier: eth0 carries the family, and both objects say so.
        let dead = LinkFact(index: 4, name: "eth1", isUp: true, hasCarrier: false, operState: .down,
                            kernelType: .ethernet, isTunnel: false)
        let split = facts([Self.via1, Self.via0, Self.via0], eth1: dead)
        #expect(Engine.evaluateInternet(split).reachableIPv4 && Engine.evaluateInternet(split).interface == "eth0")
        let path = Engine.evaluatePaths(split, bound: [2: .init(ipv4: Self.via0), 4: .init(ipv4: Self.via1)],
                                        dnsConfigured: true)
        #expect(path.interfaces.map(\.usableIPv4) == [true, false])
    }
}

@Suite("A gateway's verdict: dead once its entry failed on this segment, resolved when it has none")
struct NextHopVerdictsTests {
    private let gateway = NextHopVerdicts.Key(address: "192.0.2.1", link: 2)

    @Test("failed after being seen: dead, through the kernel's new attempts, until resolved")
    func deadUntilResolved() {
        var verdicts = NextHopVerdicts()
        #expect(verdicts.observe(gateway, state: .reachable, carrier: 1, linkUsable: true) == (false, false))
        #expect(verdicts.observe(gateway, state: .failed, carrier: 1, linkUsable: true) == (true, false))
        #expect(verdicts.observe(gateway, state: .incomplete, carrier: 1, linkUsable: true) == (true, false),
                "a program's next packet: the kernel tries again, still dead")
        #expect(verdicts.observe(gateway, state: .failed, carrier: 1, linkUsable: true) == (true, false))
        #expect(verdicts.observe(gateway, state: .reachable, carrier: 1, linkUsable: true) == (false, false))
        #expect(verdicts.observe(gateway, state: .incomplete, carrier: 1, linkUsable: true) == (false, false),
                "being resolved after it answered is no death")
    }

    @Test("no entry: resolved now while the link can carry it; a failed entry from another segment is asked again")
    func resolveWhenUnknown() {
        var verdicts = NextHopVerdicts()
        #expect(verdicts.observe(gateway, state: .absent, carrier: 1, linkUsable: true) == (false, true))
        #expect(verdicts.observe(gateway, state: .absent, carrier: 2, linkUsable: false) == (false, false),
                "no carrier: nothing to send through")
        #expect(verdicts.observe(gateway, state: .failed, carrier: 2, linkUsable: false) == (true, false),
                "a program's packet failed without the carrier (the link's own rule speaks first)")
        #expect(verdicts.observe(gateway, state: .failed, carrier: 3, linkUsable: true) == (false, true),
                "the carrier back: what failed without it says nothing now")
        #expect(verdicts.observe(gateway, state: .failed, carrier: 3, linkUsable: true) == (true, false),
                "failed again on this segment: dead")
        var fresh = NextHopVerdicts()
        #expect(fresh.observe(gateway, state: .failed, carrier: 7, linkUsable: true) == (false, true),
                "failed before the service looked: asked again")
    }

    @Test("bounded")
    func bounded() {
        var verdicts = NextHopVerdicts()
        for index in 0..<(NextHopVerdicts.limit * 2) {
            _ = verdicts.observe(.init(address: "192.0.2.\(index % 250)", link: Int32(index)), state: .failed,
                                 carrier: 1, linkUsable: true)
        }
        #expect(verdicts.observe(gateway, state: .failed, carrier: 1, linkUsable: true) == (false, true))
    }
}
