import CNetlink
import Logging
import ReachabilityCore
import ReachabilityLoop
import ReachabilityTestSupport
import Testing
@testable import ReachabilityPlatform

/// The network as a test replays it: links, and the kernel's answers to route
/// questions as they were recorded in the namespace tests (`ip route get`,
/// `ip route get fibmatch … oif …`, the route tables' links). The test changes
/// an answer, queues the invalidation the live monitor would have classified,
/// and calls `networkChanged()`; the source counts the questions asked.
@LoopActor
final class RecordedNetwork: NetworkFactSource {
    var links: [Int32: LinkFact]
    var answers: [IPAddress: RouteFact] = [:]
    var bound: [Int32: RouteFact] = [:]
    var viaGateway: Set<Int32> = []
    var onLink: Set<Int32> = []
    var pending = RouteInvalidation(all: true)
    private(set) var lookups = 0
    private(set) var followed: Set<String> = []

    init(links: [LinkFact]) {
        self.links = Dictionary(uniqueKeysWithValues: links.map { ($0.index, $0) })
    }

    /// Every IPv4 (or IPv6) internet destination answered with `route` (`nil`: no route).
    func internet(_ family: AddressFamily, _ route: RouteFact?) {
        for address in TargetEvaluator.internetDestinations.first(where: { $0.family == family })!.addresses {
            answers[address] = route
        }
    }

    func takeRouteInvalidation() -> RouteInvalidation {
        defer { pending = RouteInvalidation() }
        return pending
    }

    func facts() -> NetworkFacts { NetworkFacts(backend: .kernel, links: links) }

    func routes(to addresses: [IPAddress]) -> [RouteFact?] {
        lookups += addresses.count
        return addresses.map { answers[$0] }
    }

    func routes(bound queries: [(address: IPAddress, interface: Int32)]) -> [RouteFact?] {
        queries.map { query in bound[query.interface].flatMap { $0.interfaceIndex == query.interface ? $0 : nil } }
    }

    /// Answers from a local address: by "LOCAL,REMOTE"; the link each local address is on.
    var fromAnswers: [String: RouteFact] = [:]
    var localLinks: [IPAddress: Int32] = [:]

    func routes(pairs: [(local: IPAddress, remote: IPAddress)]) -> [RouteFact?] {
        lookups += pairs.count
        return pairs.map { fromAnswers["\($0.local),\($0.remote)"] }
    }

    func link(holding address: IPAddress) -> Int32? { localLinks[address] }
    func routedLinks() -> (viaGateway: Set<Int32>, onLink: Set<Int32>) { (viaGateway, onLink) }
    func dnsConfigured() -> Bool { true }
    func follow(gateways: Set<String>) { followed.formUnion(gateways) }
    /// Whether every source gave its first answer (a live source waits for NetworkManager's).
    var hasFirstAnswer = true
}

/// The evaluator's sink: the internet target alone.
@LoopActor
final class InternetOnly: EvaluationSink {
    let internet = WatchedTarget()
    private(set) var changes: [ReachabilityFlags?] = []
    var evaluatedTargets: [WatchedTarget] { [internet] }
    func targetChanged(_ target: WatchedTarget, from old: TargetState) { changes.append(target.state.flags) }
}

private let eth0 = LinkFact(index: 2, name: "kveth0", isUp: true, hasCarrier: true, operState: .up,
                            kernelType: .ethernet, isTunnel: false)
private let eth1 = LinkFact(index: 4, name: "kveth1", isUp: true, hasCarrier: true, operState: .up,
                            kernelType: .ethernet, isTunnel: false)
private let tun0 = LinkFact(index: 5, name: "tun0", isUp: true, hasCarrier: true, operState: .unknown,
                            kernelType: .other, isTunnel: true, isPointToPoint: true)
private let via0 = RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 2, gateway: "192.0.2.1", metric: 100)
private let via1 = RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 4, gateway: "198.51.100.1", metric: 50)

@Suite("The evaluator on recorded kernel answers")
struct RecordedNetworkTests {
    /// The evaluator lives on the loop; every test runs there.
    init() { LoopThread.start() }

    @LoopActor private func evaluator(_ network: RecordedNetwork, logger: Logger = recordingLogger().logger)
        -> (TargetEvaluator, InternetOnly)
    {
        let evaluator = TargetEvaluator(refreshInterval: 300, logger: logger)
        let sink = InternetOnly()
        evaluator.sink = sink
        evaluator.start(source: network)
        evaluator.networkChanged()
        return (evaluator, sink)
    }

    @Test("1: an IPv6 default route with a lifetime arms one timer at its end and is asked again then; none without a lifetime")
    @LoopActor func expiry() throws {
        let network = RecordedNetwork(links: [eth0])
        func v6(lifetime: UInt32) -> RouteFact {
            RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 2, gateway: "2001:db8:1::1", metric: 1024,
                      lifetime: lifetime)
        }
        network.internet(.ipv6, v6(lifetime: 3000))
        let (evaluator, sink) = evaluator(network)
        #expect(sink.internet.state.reachableIPv6 && sink.internet.state.flags == .reachable)
        let expiry = try #require(evaluator.nextExpiry)
        let wait = expiry - MonotonicClock.microseconds()
        #expect(wait > 2_900_000 && wait <= 3_000_000, "the timer is at the route's end")

        // Evaluated again before the end (an event that makes no answer stale): kept, not asked.
        let asked = network.lookups
        evaluator.networkChanged()
        #expect(network.lookups == asked)

        // A lifetime that ends now (within the kernel's tick): the timer's evaluation asks again.
        network.internet(.ipv6, v6(lifetime: 10))
        network.pending = RouteInvalidation(all: true)
        evaluator.networkChanged()
        network.internet(.ipv6, nil)
        evaluator.networkChanged()
        #expect(sink.internet.state.flags == [] && !sink.internet.state.reachableIPv6)
        #expect(evaluator.nextExpiry == nil, "nothing left to expire: no timer")
        #expect(sink.changes == [.reachable, []])

        let plain = RecordedNetwork(links: [eth0])
        plain.internet(.ipv4, via0)
        let (withoutLifetime, _) = self.evaluator(plain)
        #expect(withoutLifetime.nextExpiry == nil, "a route without a lifetime arms nothing")
    }

    @Test("ready: an evaluation counts as the first answer only once the source has given its own")
    @LoopActor func firstAnswerOnlyWithTheSource() {
        let network = RecordedNetwork(links: [eth0])
        network.internet(.ipv4, via0)
        network.hasFirstAnswer = false
        let (evaluator, sink) = evaluator(network)
        #expect(evaluator.hasFacts && !evaluator.everySourceAnswered, "facts read, but not from every source")
        network.hasFirstAnswer = true
        #expect(!evaluator.everySourceAnswered, "known from the next evaluation, not from the source alone")
        evaluator.networkChanged()
        #expect(evaluator.everySourceAnswered && sink.internet.state.flags == .reachable)
    }

    @Test("reload: everything evaluated again, every cached route asked again")
    @LoopActor func reevaluateEverything() {
        let network = RecordedNetwork(links: [eth0])
        network.internet(.ipv4, via0)
        let (evaluator, sink) = evaluator(network)
        let asked = network.lookups
        evaluator.networkChanged()
        #expect(network.lookups == asked, "an evaluation with nothing stale asks nothing")
        network.internet(.ipv4, nil)
        evaluator.reevaluateEverything()
        #expect(network.lookups > asked, "the cached answers are forgotten")
        #expect(sink.internet.state.flags == [] && sink.changes == [.reachable, []])
    }

    @Test("the evaluator logs to the logger it is given: one debug line per evaluation, naming what changed")
    @LoopActor func evaluationLine() {
        let network = RecordedNetwork(links: [eth0])
        network.internet(.ipv4, via0)
        let log = recordingLogger()
        let (evaluator, sink) = evaluator(network, logger: log.logger)
        network.internet(.ipv4, nil)
        network.pending = RouteInvalidation(all: true)
        evaluator.networkChanged()
        evaluator.networkChanged()
        let lines = log.records.entries.filter { $0.level == .debug }.map { "\($0.message)" }
            .filter { $0.hasPrefix("evaluated ") }
        #expect(lines.count == 3, "\(log.records.entries)")
        guard lines.count == 3 else { return }
        #expect(lines[0].hasPrefix("evaluated 1 targets in ") && lines[0].contains(" ms; announced 1 changes in "))
        #expect(lines[0].hasSuffix(" ms; internet: reachable via kveth0"), "\(lines[0])")
        #expect(lines[1].contains("; internet: not reachable"), "\(lines[1])")
        #expect(lines[2].contains("announced 0 changes in ") && lines[2].hasSuffix(" ms"), "\(lines[2])")
        #expect(sink.changes == [.reachable, []])
    }

    @Test("2: the evaluation after a carrier change follows the kernel, both ways")
    @LoopActor func carrierBothWays() {
        let network = RecordedNetwork(links: [eth0, eth1])
        network.internet(.ipv4, via1)
        let (evaluator, sink) = evaluator(network)
        var classifier = StalenessClassifier()
        classifier.seed(links: [(2, true, true), (4, true, true)])

        network.links[4]?.hasCarrier = false
        network.internet(.ipv4, via0)
        network.pending = classifier.classify(.link(index: 4, isUp: true, hasCarrier: false))
        evaluator.networkChanged()
        #expect(sink.internet.state.interface == "kveth0" && sink.internet.state.flags == .reachable)

        // Carrier back; the next-hop object and its route are gone: the kernel says no route.
        network.links[4]?.hasCarrier = true
        network.internet(.ipv4, nil)
        network.pending = classifier.classify(.link(index: 4, isUp: true, hasCarrier: true))
        evaluator.networkChanged()
        #expect(sink.internet.state.flags == [])
        #expect(sink.changes == [.reachable, .reachable, []], "one change per real change (kveth1, kveth0, none)")
    }

    @Test("3: a followed gateway's neighbour fails: the kernel's other default route")
    @LoopActor func neighbourFailed() {
        let network = RecordedNetwork(links: [eth0, eth1])
        network.internet(.ipv4, via0)
        let (evaluator, sink) = evaluator(network)
        #expect(network.followed.contains("192.0.2.1"), "the answer's gateway is followed")
        var classifier = StalenessClassifier()
        classifier.follow(gateways: network.followed)
        network.internet(.ipv4, via1)
        let asked = network.lookups
        network.pending = classifier.classify(.neighbour(address: "198.51.100.77", state: .failed))
        #expect(network.pending.isEmpty, "a neighbour that is no followed gateway")
        network.pending = classifier.classify(.neighbour(address: "192.0.2.1", state: .failed))
        evaluator.networkChanged()
        #expect(sink.internet.state.interface == "kveth1" && network.lookups > asked)
    }

    @Test("4: ignore_routes_with_linkdown switched: asked again, the kernel now skips the dead link")
    @LoopActor func ignoreLinkdown() {
        let network = RecordedNetwork(links: [eth0, eth1])
        network.links[4]?.hasCarrier = false
        network.internet(.ipv4, via1)
        let (evaluator, sink) = evaluator(network)
        #expect(sink.internet.state.flags == [])
        network.internet(.ipv4, via0)
        var classifier = StalenessClassifier()
        network.pending = classifier.classify(.deviceConfiguration(ignoresLinkdownRoutes: true))
        evaluator.networkChanged()
        #expect(sink.internet.state.flags == .reachable && sink.internet.state.interface == "kveth0")
    }

    @Test("5: openconnect's layout: the tunnel's default route and a host route to the server via kveth0")
    @LoopActor func openconnect() {
        let network = RecordedNetwork(links: [eth0, tun0])
        network.internet(.ipv4, RouteFact(kind: .unicast, hasGateway: false, interfaceIndex: 5))
        network.viaGateway = [2]  // 198.51.100.200/32 via 192.0.2.1 dev kveth0
        network.onLink = [2, 5]
        let (evaluator, sink) = evaluator(network)
        #expect(sink.internet.state.flags == [.reachable, .transientConnection] && sink.internet.state.isVPN)
        network.links[2]?.hasCarrier = false
        network.pending = RouteInvalidation(all: true)
        evaluator.networkChanged()
        #expect(sink.internet.state.flags == [])
    }

    @Test("6: one destination behind a host route, no default route: not reachable")
    @LoopActor func oneProbe() {
        let network = RecordedNetwork(links: [eth0])
        network.answers[TargetEvaluator.internetDestinations[0].addresses[0]] = via0
        let (_, sink) = evaluator(network)
        #expect(sink.internet.state.flags == [] && !sink.internet.state.reachableIPv4)
    }

    @Test("address pairs: the route from the local address (source rules), the local address's link, or none")
    @LoopActor func addressPairs() throws {
        let network = RecordedNetwork(links: [eth0, eth1])
        network.internet(.ipv4, via0)
        let (evaluator, _) = evaluator(network)
        let local = try IPAddress(parsing: "198.51.100.10")
        let remote = try IPAddress(parsing: "203.0.113.7")
        network.answers[remote] = via0  // no source: the main table, kveth0
        network.fromAnswers["198.51.100.10,203.0.113.7"] = via1  // from kveth1's address: its own table
        let pair = WatchedTarget(.pair(local: local, remote: remote))
        #expect(evaluator.state(of: pair).interface == "kveth1" && evaluator.state(of: pair).flags == .reachable)
        #expect(evaluator.state(ofPair: nil, remote).interface == "kveth0")
        #expect(evaluator.state(ofPair: try IPAddress(parsing: "192.0.2.99"), remote).flags == [],
                "a local address that is not this host's has no route")

        network.localLinks[local] = 4
        let alone = evaluator.state(ofPair: local, nil)
        #expect(alone.flags == [.reachable, .isLocalAddress, .isDirect] && alone.interface == "kveth1")
        network.links[4]?.hasCarrier = false
        network.pending = RouteInvalidation(all: true)
        evaluator.networkChanged()
        #expect(evaluator.state(ofPair: local, nil).flags == [], "its link cannot carry packets")
    }

    @Test("7 and 8: each link its own next hop's gateway; no family usable that the target does not reach")
    @LoopActor func pathPerLink() {
        let network = RecordedNetwork(links: [eth0, eth1])
        network.internet(.ipv4, via0)
        network.bound = [2: via0, 4: via1]
        let (evaluator, _) = evaluator(network)
        evaluator.isPathWanted = true
        let gateways = Dictionary(uniqueKeysWithValues: evaluator.pathState.interfaces.map { ($0.name, $0.gateways) })
        #expect(gateways == ["kveth0": ["192.0.2.1"], "kveth1": ["198.51.100.1"]])
        #expect(evaluator.pathState.interfaces.allSatisfy { !$0.usableIPv6 }, "IPv6 is reached by no answer")
    }
}
