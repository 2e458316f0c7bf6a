import ReachabilityCore
import ReachabilityLoop
import Testing
@testable import ReachabilityPlatform

/// The evaluator's sink: the targets a test watches, and what it heard.
@LoopActor
private final class Watching: EvaluationSink {
    var targets: [WatchedTarget] = []
    private(set) var changes: [(name: String, state: TargetState)] = []
    private(set) var settled: [String] = []
    var evaluatedTargets: [WatchedTarget] { targets }
    func targetChanged(_ target: WatchedTarget, from old: TargetState) { changes.append((target.name, target.state)) }
    func lookupSettled(_ target: WatchedTarget) { settled.append(target.name) }
}

private let eth0 = LinkFact(index: 2, name: "kveth0", isUp: true, hasCarrier: true, operState: .up,
                            kernelType: .ethernet, isTunnel: false)
private let via0 = RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 2, gateway: "192.0.2.1", metric: 100)

@Suite("Host targets, with lookups the test answers")
struct HostTargetTests {
    init() { LoopThread.start() }

    /// An evaluator on one link, its route to 198.51.100.80 through kveth0, nothing else routed.
    @LoopActor private func evaluator() -> (TargetEvaluator, RecordedNetwork, ScriptedResolver, Watching) {
        let network = RecordedNetwork(links: [eth0])
        network.internet(.ipv4, via0)
        network.answers[try! IPAddress(parsing: "198.51.100.80")] = via0
        let resolver = ScriptedResolver()
        let evaluator = TargetEvaluator(refreshInterval: 300, logger: recordingLogger().logger, resolver: resolver)
        let sink = Watching()
        evaluator.sink = sink
        evaluator.start(source: network)
        return (evaluator, network, resolver, sink)
    }

    @Test("unknown until its lookup answers; then its addresses' routes decide, and the waiting hear it")
    @LoopActor func firstAnswer() throws {
        let (evaluator, _, resolver, sink) = evaluator()
        let host = WatchedTarget(.host("example.com"), owner: 1000)
        sink.targets = [host]
        evaluator.networkChanged()
        #expect(resolver.pending.map(\.host) == ["example.com"])
        #expect(resolver.pending.first?.owner == 1000, "charged to the first holder")
        #expect(host.state == .unknown && !host.isSettled && sink.settled.isEmpty)

        #expect(resolver.answer("example.com", ["198.51.100.80"]))
        #expect(host.isSettled && host.state.flags == .reachable && host.state.interface == "kveth0")
        #expect(host.host?.resolution == .resolved([try IPAddress(parsing: "198.51.100.80")]))
        #expect(sink.changes.map(\.state.flags) == [.reachable])
        #expect(sink.settled == ["example.com"])
    }

    @Test("a failed lookup is an answer: not reachable, in the resolver's words")
    @LoopActor func failed() {
        let (evaluator, _, resolver, sink) = evaluator()
        let host = WatchedTarget(.host("nowhere.example"))
        sink.targets = [host]
        evaluator.networkChanged()
        #expect(resolver.fail("nowhere.example", "Name or service not known"))
        #expect(host.isSettled && host.state.flags == [] && host.state.reason == .lookupFailed)
        #expect(host.state.error == "Name or service not known")
        #expect(sink.settled == ["nowhere.example"])
    }

    @Test("a change during a lookup looks up once more when it ends; the waiting hear only the last answer")
    @LoopActor func lookupAgain() {
        let (evaluator, _, resolver, sink) = evaluator()
        let host = WatchedTarget(.host("example.com"))
        sink.targets = [host]
        evaluator.networkChanged()
        evaluator.networkChanged()
        #expect(resolver.lookups.count == 1, "one lookup in flight at a time")
        #expect(resolver.answer("example.com", ["192.0.2.99"]))
        #expect(host.state.flags == [], "the first answer is applied at once (no route to it)")
        #expect(sink.settled.isEmpty && resolver.pending.count == 1, "and a second lookup follows")
        #expect(resolver.answer("example.com", ["198.51.100.80"]))
        #expect(host.state.flags == .reachable && sink.settled == ["example.com"])
        #expect(resolver.pending.isEmpty)
    }

    @Test("a target that goes away cancels its lookup; addresses and pairs are never looked up")
    @LoopActor func cancelAndOtherKinds() throws {
        let (evaluator, _, resolver, sink) = evaluator()
        let host = WatchedTarget(.host("example.com"))
        let others = [WatchedTarget(), WatchedTarget(.address(try IPAddress(parsing: "198.51.100.80"))),
                      WatchedTarget(.pair(local: nil, remote: try IPAddress(parsing: "198.51.100.80")))]
        sink.targets = [host] + others
        evaluator.networkChanged()
        #expect(resolver.lookups.map(\.host) == ["example.com"])
        #expect(others.allSatisfy { $0.isSettled && $0.host == nil })
        host.cancel()
        #expect(resolver.lookups.first?.isCancelled == true)
        #expect(!resolver.answer("example.com", ["198.51.100.80"]) && host.state == .unknown)
    }

    @Test("a host's routes are kept like an address's, and forgotten with it")
    @LoopActor func routesKeptAndForgotten() {
        let (evaluator, network, resolver, sink) = evaluator()
        let host = WatchedTarget(.host("example.com"))
        sink.targets = [host]
        evaluator.networkChanged()
        resolver.answer("example.com", ["198.51.100.80"])
        let asked = network.lookups
        evaluator.networkChanged()
        #expect(network.lookups == asked, "nothing stale: its route is not asked again")
        evaluator.forgetRoutes(of: host)
        _ = evaluator.state(of: host)
        #expect(network.lookups == asked + 1, "forgotten: asked again")
    }

    @Test("the refresh timer exists exactly while host targets do; a one-shot lookup needs no target")
    @LoopActor func refreshTimerAndQuery() {
        let (evaluator, _, resolver, _) = evaluator()
        evaluator.networkChanged()
        #expect(evaluator.refreshTimer == nil)
        evaluator.hostTargetsChanged(count: 1)
        #expect(evaluator.refreshTimer != nil)
        evaluator.hostTargetsChanged(count: 0)
        #expect(evaluator.refreshTimer == nil)

        var answered: TargetState?
        evaluator.evaluate(host: "once.example", owner: 1234) { answered = $0 }
        #expect(resolver.pending.map(\.owner) == [1234] && answered == nil)
        resolver.answer("once.example", ["198.51.100.80"])
        #expect(answered?.flags == .reachable)
    }

    @Test("each kind: its Kind, name, input and log name; the unspecified address is the internet, kept as asked")
    @LoopActor func kinds() throws {
        let zero = try IPAddress(parsing: "0.0.0.0")
        let local = try IPAddress(parsing: "192.0.2.10")
        let remote = try IPAddress(parsing: "198.51.100.7")
        let root = WatchedTarget()
        #expect(root.kind == .internet && root.name == "" && root.input == nil && root.logName == "internet")
        let unspecified = WatchedTarget(.address(zero))
        #expect(unspecified.kind == .internet && unspecified.name == "0.0.0.0" && unspecified.logName == "internet")
        #expect(unspecified.input == .address(zero), "held as the address it was asked as")
        let host = WatchedTarget(.host("example.com"))
        #expect(host.kind == .host && host.name == "example.com" && host.input == .host("example.com"))
        let address = WatchedTarget(.address(remote))
        #expect(address.kind == .address && address.name == "198.51.100.7" && address.logName == "198.51.100.7")
        let pair = WatchedTarget(.pair(local: local, remote: remote))
        #expect(pair.kind == .pair && pair.name == "192.0.2.10,198.51.100.7")
        #expect(pair.input == .pair(local: local, remote: remote))
        #expect(WatchedTarget(.pair(local: nil, remote: remote)).name == ",198.51.100.7")
    }
}
