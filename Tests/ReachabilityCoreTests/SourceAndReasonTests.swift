import Testing
@testable import ReachabilityCore

private let eth0 = LinkFact(index: 2, name: "eth0", isUp: true, hasCarrier: true, operState: .up,
                            kernelType: .ethernet, isTunnel: false)

private func facts(v4: RouteFact? = nil, v6: RouteFact? = nil, link: LinkFact = eth0,
                   addresses: [AddressFact]? = [], devices: [DeviceFact] = []) -> NetworkFacts {
    var byName: [String: DeviceFact] = [:]
    for device in devices { byName[device.interface] = device }
    return NetworkFacts(backend: .kernel, devices: byName, links: [2: link],
                        internetRoutes: [.ipv4: [v4], .ipv6: [v6]], addresses: addresses)
}

private func v6(source: String?) -> RouteFact {
    RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 2, gateway: "fe80::1", source: source)
}

@Suite("The source rule: a route counts only with a source address a packet can leave with")
struct SourceRuleTests {
    @Test("an IPv6 answer whose source is global and may send counts")
    func usableSource() {
        let address = AddressFact(address: "2001:db8::2", family: .ipv6, interfaceIndex: 2)
        let path = Engine.evaluatePath(family: .ipv6, route: v6(source: "2001:db8::2"),
                                       facts: facts(addresses: [address]))
        #expect(path.flags == .reachable)
        #expect(path.cause == nil)
    }

    @Test("tentative (DAD running) and DAD-failed sources: no path; optimistic ones may send",
          arguments: [
            (AddressFact(address: "2001:db8::2", family: .ipv6, interfaceIndex: 2, isTentative: true), false),
            (AddressFact(address: "2001:db8::2", family: .ipv6, interfaceIndex: 2, isTentative: true,
                         isDADFailed: true), false),
            (AddressFact(address: "2001:db8::2", family: .ipv6, interfaceIndex: 2, isTentative: true,
                         isOptimistic: true), true),
          ])
    func dadStates(address: AddressFact, reachable: Bool) {
        let path = Engine.evaluatePath(family: .ipv6, route: v6(source: "2001:db8::2"),
                                       facts: facts(addresses: [address]))
        #expect(path.flags.contains(.reachable) == reachable)
        #expect(path.cause?.reason == (reachable ? nil : .noSourceAddress))
    }

    @Test("the kernel's fallbacks, loopback and link-local sources, missing sources: no path to the internet",
          arguments: [("::1", AddressFamily.ipv6), ("fe80::5", .ipv6), ("::", .ipv6), ("169.254.3.4", .ipv4),
                      ("0.0.0.0", .ipv4)] as [(String?, AddressFamily)] + [(nil, .ipv4)])
    func unusableSources(source: String?, family: AddressFamily) {
        let tentative = AddressFact(address: "2001:db8::2", family: .ipv6, interfaceIndex: 2, isTentative: true)
        let route = RouteFact(kind: .unicast, hasGateway: false, interfaceIndex: 2, source: source)
        let path = Engine.evaluatePath(family: family, route: route, facts: facts(addresses: [tentative]))
        #expect(path.flags == [])
        #expect(path.cause?.reason == .noSourceAddress)
        if family == .ipv6 { #expect(path.cause?.detail.contains("2001:db8::2 is tentative") == true) }
    }

    @Test("a link-local destination may be reached from a link-local source")
    func linkLocalDestination() {
        let route = RouteFact(kind: .unicast, hasGateway: false, interfaceIndex: 2, source: "169.254.3.4")
        let path = Engine.evaluatePath(family: .ipv4, route: route, facts: facts(), destination: "169.254.9.9")
        #expect(path.flags == [.reachable, .isDirect])
        let remote = Engine.evaluatePath(family: .ipv4, route: route, facts: facts(), destination: "192.0.2.9")
        #expect(remote.flags == [])
    }

    @Test("a local route needs no source; addresses not read judge nothing")
    func exemptions() {
        let local = RouteFact(kind: .local, hasGateway: false, interfaceIndex: 2)
        #expect(Engine.evaluatePath(family: .ipv4, route: local, facts: facts()).flags.contains(.reachable))
        let bare = RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 2)
        #expect(Engine.evaluatePath(family: .ipv4, route: bare, facts: facts(addresses: nil)).flags == .reachable)
    }

    @Test("the internet and the Path agree per family: a tentative IPv6 address makes neither usable")
    func pathAgrees() {
        let tentative = AddressFact(address: "2001:db8::2", family: .ipv6, interfaceIndex: 2, isTentative: true)
        var state = facts(v6: v6(source: "::1"), addresses: [tentative])
        let internet = Engine.evaluateInternet(state)
        #expect(!internet.reachableIPv6 && internet.reason == .noSourceAddress)
        let bound = [Int32(2): Engine.BoundRoutes(ipv6: v6(source: nil))]
        let path = Engine.evaluatePaths(state, bound: bound, dnsConfigured: true)
        #expect(path.interfaces.first?.usableIPv6 == false && path.reason == .noSourceAddress)
        state.addresses = [AddressFact(address: "2001:db8::2", family: .ipv6, interfaceIndex: 2)]
        state.internetRoutes[.ipv6] = [v6(source: "2001:db8::2")]
        #expect(Engine.evaluateInternet(state).reachableIPv6)
        let usable = Engine.evaluatePaths(state, bound: bound, dnsConfigured: true)
        #expect(usable.interfaces.first?.usableIPv6 == true && usable.reason == nil)
    }
}

@Suite("Reason: one word for the first cause found, in the engine")
struct ReasonTests {
    private static let gateway = RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 2, source: "192.0.2.2")

    @Test("each rule names its cause",
          arguments: [
            (nil as RouteFact?, eth0, Reason.noRoute),
            (RouteFact(kind: .unusable, hasGateway: false, interfaceIndex: 0, rejection: "prohibit"), eth0, .rejected),
            (gateway, LinkFact(index: 2, name: "eth0", isUp: false, hasCarrier: false, operState: .down,
                               kernelType: .ethernet, isTunnel: false), .linkDown),
            (gateway, LinkFact(index: 2, name: "eth0", isUp: true, hasCarrier: false, operState: .down,
                               kernelType: .ethernet, isTunnel: false), .noCarrier),
            (gateway, LinkFact(index: 2, name: "eth0", isUp: true, hasCarrier: true, operState: .up,
                               kernelType: .ethernet, isTunnel: false, hasNoARP: true), .noNeighbour),
            (gateway, LinkFact(index: 2, name: "tun0", isUp: true, hasCarrier: true, operState: .unknown,
                               kernelType: .other, isTunnel: true), .noUnderlay),
          ])
    func causes(route: RouteFact?, link: LinkFact, reason: Reason) {
        var state = facts(v4: route, link: link)
        state.underlayLinks = []
        let target = Engine.evaluateInternet(state)
        #expect(target.reason == reason)
        #expect(!target.error.isEmpty)
    }

    @Test("ARP off stops only links that resolve neighbours: point-to-point and local routes need none")
    func noARP() {
        let ptp = LinkFact(index: 2, name: "ppp0", isUp: true, hasCarrier: true, operState: .unknown,
                           kernelType: .ethernet, isTunnel: false, isPointToPoint: true, hasNoARP: true)
        #expect(Engine.evaluateInternet(facts(v4: Self.gateway, link: ptp)).isReachable)
        let eth = LinkFact(index: 2, name: "eth0", isUp: true, hasCarrier: true, operState: .up,
                           kernelType: .ethernet, isTunnel: false, hasNoARP: true)
        let onLink = RouteFact(kind: .unicast, hasGateway: false, interfaceIndex: 2, source: "192.0.2.2")
        let target = Engine.evaluateInternet(facts(v4: onLink, link: eth))
        #expect(target.reason == .noNeighbour && target.error == "ARP is off on eth0")
    }

    @Test("a gateway whose neighbour entry failed carries nothing: gateway-unreachable, in words")
    func failedGateway() {
        var failed = RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 2, gateway: "192.0.2.1",
                               source: "192.0.2.2")
        failed.nextHopFailed = true
        let target = Engine.evaluateInternet(facts(v4: failed, addresses: nil))
        #expect(!target.isReachable && target.flags == [])
        #expect(target.reason == .gatewayUnreachable
                && target.error == "the gateway 192.0.2.1 does not answer on eth0 (its neighbour entry failed)")
        // An on-link route has no gateway to fail; the mark means nothing there.
        var onLink = RouteFact(kind: .unicast, hasGateway: false, interfaceIndex: 2, source: "192.0.2.2")
        onLink.nextHopFailed = true
        #expect(Engine.evaluateInternet(facts(v4: onLink, addresses: nil)).isReachable)
    }

    @Test("reachable: no reason, no sentence")
    func reachable() {
        let target = Engine.evaluateInternet(facts(v4: Self.gateway, addresses: nil))
        #expect(target.isReachable && target.reason == nil && target.error == "")
    }

    @Test("the cause that got furthest wins: IPv6's missing source over IPv4's missing route")
    func deepest() {
        let target = Engine.evaluateInternet(facts(v4: nil, v6: v6(source: "fe80::5")))
        #expect(target.reason == .noSourceAddress)
    }

    @Test("activation and portal say so",
          arguments: [(DeviceFact.Activity.activating, Reason.connecting), (.needsAuthentication, .needsAuth)])
    func activation(activity: DeviceFact.Activity, reason: Reason) {
        let device = DeviceFact(interface: "wlan0", type: .wifi, activity: activity)
        #expect(Engine.evaluateInternet(facts(devices: [device])).reason == reason)
    }

    @Test("portal")
    func portal() {
        var state = facts(v4: Self.gateway, addresses: nil)
        state.connectivity = .portal
        #expect(Engine.evaluateInternet(state).reason == .portal)
    }

    @Test("a failed lookup")
    func lookup() {
        let state = Engine.resolutionFailed("no such name", facts: facts())
        #expect(state.reason == .lookupFailed && state.error == "no such name")
    }
}

@Suite("uid rules: one answer per class of callers the rules route alike")
struct UIDRuleTests {
    @Test("no rule: one class for everybody")
    func none() {
        let rules = UIDRules()
        #expect(rules.isEmpty && rules.answerClass(of: 0) == rules.answerClass(of: 1000))
    }

    @Test("users in the same ranges share a class; others do not")
    func classes() {
        let rules = UIDRules(ranges: [1000...1999, 1500...1500])
        #expect(rules.answerClass(of: 1000) == rules.answerClass(of: 1999))
        #expect(rules.answerClass(of: 1000) != rules.answerClass(of: 1500))
        #expect(rules.answerClass(of: 0) == .unnamed && rules.answerClass(of: 65534) == .unnamed)
    }
}
