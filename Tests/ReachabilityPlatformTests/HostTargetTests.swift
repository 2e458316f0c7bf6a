import ReachabilityTestSupport
import ReachabilityCore
import ReachabilityLoop
import Testing
@testable import ReachabilityPlatform

/// The evaluator's sink: the targets a test watches, and what it heard.
@LoopActor
private final class Watching: EvaluationSink {
    var targets: [WatchedTarget] = []
    private(set) var changes: [(name: String, state: TargetState)] = []
    private(set) var finished: [String] = []
    var evaluatedTargets: [WatchedTarget] { targets }
    func targetChanged(_ target: WatchedTarget, from old: TargetState) { changes.append((target.name, target.state)) }
    func lookupFinished(_ target: WatchedTarget) { finished.append(target.name) }
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
        #expect(host.state == .unknown && !host.firstLookupFinished && sink.finished.isEmpty)

        #expect(resolver.answer("example.com", ["198.51.100.80"]))
        #expect(host.firstLookupFinished && host.state.flags == .reachable && host.state.interface == "kveth0")
        #expect(host.host?.resolution == .resolved([try IPAddress(parsing: "198.51.100.80")]))
        #expect(sink.changes.map(\.state.flags) == [.reachable])
        #expect(sink.finished == ["example.com"])
    }

    @Test("a failed lookup is an answer: not reachable, in the resolver's words")
    @LoopActor func failed() {
        let (evaluator, _, resolver, sink) = evaluator()
        let host = WatchedTarget(.host("nowhere.example"))
        sink.targets = [host]
        evaluator.networkChanged()
        #expect(resolver.fail("nowhere.example", "Name or service not known"))
        #expect(host.firstLookupFinished && host.state.flags == [] && host.state.reason == .lookupFailed)
        #expect(host.state.error == "Name or service not known")
        #expect(sink.finished == ["nowhere.example"])
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
        #expect(sink.finished.isEmpty && resolver.pending.count == 1, "and a second lookup follows")
        #expect(resolver.answer("example.com", ["198.51.100.80"]))
        #expect(host.state.flags == .reachable && sink.finished == ["example.com"])
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
        #expect(others.allSatisfy { $0.firstLookupFinished && $0.host == nil })
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

    // MARK: Temporary failures

    static let temporaryFailure = "Temporary failure in name resolution"

    @Test("a temporary failure is told, then looked up again on its own after waits that grow, until it answers")
    @LoopActor func temporaryFailureRetried() throws {
        let (evaluator, _, resolver, sink) = evaluator()
        let host = WatchedTarget(.host("example.com"), owner: 1000)
        sink.targets = [host]
        evaluator.networkChanged()
        let failed = MonotonicClock.microseconds()
        #expect(resolver.fail("example.com", Self.temporaryFailure, temporary: true))
        #expect(host.state.flags == [] && host.state.reason == .lookupFailed && host.state.error == Self.temporaryFailure)
        #expect(sink.finished == ["example.com"], "told at once: the waiting hear the answer there is")
        #expect(resolver.pending.isEmpty && evaluator.schedule.count == 1)
        let first = try #require(evaluator.schedule.deadline)
        #expect(first - failed >= 500_000 && first - failed < 600_000, "the first retry half a second later")

        evaluator.schedule.makeDue(now: first)
        #expect(resolver.pending.map(\.host) == ["example.com"] && resolver.pending.first?.owner == 1000,
                "a lookup like any other, charged to the host's owner")
        #expect(evaluator.schedule.count == 0 && evaluator.schedule.deadline == nil, "no timer while it runs")
        let again = MonotonicClock.microseconds()
        #expect(resolver.fail("example.com", Self.temporaryFailure, temporary: true))
        let second = try #require(evaluator.schedule.deadline)
        #expect(second - again >= 1_000_000 && second - again < 1_100_000, "then a second later")
        #expect(sink.changes.count == 1, "the same answer again is no change")

        evaluator.schedule.makeDue(now: second)
        #expect(resolver.answer("example.com", ["198.51.100.80"]))
        #expect(host.state.flags == .reachable && host.state.error.isEmpty)
        #expect(evaluator.schedule.count == 0 && evaluator.schedule.deadline == nil, "answered: no retry, no timer")
        #expect(resolver.lookups.count == 3)
    }

    @Test("a name that does not exist is an answer: never retried, no timer")
    @LoopActor func notFoundNotRetried() {
        let (evaluator, _, resolver, sink) = evaluator()
        let host = WatchedTarget(.host("nowhere.example"))
        sink.targets = [host]
        evaluator.networkChanged()
        #expect(resolver.fail("nowhere.example", "Name or service not known"))
        #expect(host.state.error == "Name or service not known")
        #expect(evaluator.schedule.count == 0 && evaluator.schedule.deadline == nil)
        evaluator.schedule.makeDue(now: .max / 2)
        #expect(resolver.lookups.count == 1)
    }

    @Test("a released target is owed nothing: its retry and the timer go with it")
    @LoopActor func releasedStopsRetries() {
        let (evaluator, _, resolver, sink) = evaluator()
        let host = WatchedTarget(.host("example.com"))
        let other = WatchedTarget(.host("other.example"))
        sink.targets = [host, other]
        evaluator.networkChanged()
        resolver.fail("example.com", Self.temporaryFailure, temporary: true)
        resolver.fail("other.example", Self.temporaryFailure, temporary: true)
        #expect(evaluator.schedule.count == 2 && evaluator.schedule.deadline != nil)

        sink.targets = [other]
        host.cancel()
        #expect(evaluator.schedule.count == 1 && evaluator.schedule.deadline != nil, "the other's is still owed")
        other.cancel()
        sink.targets = []
        #expect(evaluator.schedule.count == 0 && evaluator.schedule.deadline == nil, "none owed: no timer")
        evaluator.schedule.makeDue(now: .max / 2)
        #expect(resolver.lookups.count == 2, "nothing looked up again")
    }

    @Test("a fresh reason to look up makes the retry owed at once and starts the waits again; after the quick retries, every 30 s")
    @LoopActor func freshLookupReplacesRetry() throws {
        let (evaluator, _, resolver, sink) = evaluator()
        let host = WatchedTarget(.host("example.com"))
        sink.targets = [host]
        evaluator.networkChanged()
        var failures = 0
        // Every retry fails for now: after as many as there are waits, one every 30 s.
        var waits: [Int64] = []
        while resolver.fail("example.com", Self.temporaryFailure, temporary: true) {
            failures += 1
            let failed = MonotonicClock.microseconds()
            guard let deadline = evaluator.schedule.deadline, failures <= LookupSchedule.delays.count + 2 else { break }
            waits.append(deadline - failed)
            evaluator.schedule.makeDue(now: deadline)
        }
        #expect(failures == LookupSchedule.delays.count + 3)
        for (wait, expected) in zip(waits, LookupSchedule.delays + [NameLifetime.outageRetry, NameLifetime.outageRetry]) {
            #expect(wait <= expected && wait > expected - 100_000, "waited \(wait) µs, not \(expected)")
        }
        let capped = try #require(evaluator.schedule.deadline)
        #expect(capped - MonotonicClock.microseconds() > NameLifetime.outageRetry - 100_000,
                "after the quick retries, the capped interval")

        // The refresh timer's lookup fails again: still the capped interval, not the quick waits.
        evaluator.resolve(host, afresh: false)
        #expect(resolver.fail("example.com", Self.temporaryFailure, temporary: true))
        #expect(try #require(evaluator.schedule.deadline) - MonotonicClock.microseconds() > NameLifetime.outageRetry - 100_000)

        // A network change: looked up at once, and a failure is retried from the shortest wait again.
        evaluator.networkChanged()
        let failed = MonotonicClock.microseconds()
        #expect(resolver.fail("example.com", Self.temporaryFailure, temporary: true))
        let deadline = try #require(evaluator.schedule.deadline)
        #expect(deadline - failed < 600_000)
        evaluator.networkChanged()
        #expect(resolver.pending.count == 1 && evaluator.schedule.count == 0 && evaluator.schedule.deadline == nil,
                "the change's lookup replaces the retry owed")
    }

    @Test("the retries of a burst of failures are made together, at one wake-up")
    @LoopActor func burstCoalesced() throws {
        let (evaluator, _, resolver, sink) = evaluator()
        let names = (0..<5).map { "host\($0).example" }
        sink.targets = names.map { WatchedTarget(.host($0)) }
        evaluator.networkChanged()
        for name in names { resolver.fail(name, Self.temporaryFailure, temporary: true) }
        #expect(evaluator.schedule.count == 5)
        evaluator.schedule.makeDue(now: try #require(evaluator.schedule.deadline))
        #expect(Set(resolver.pending.map(\.host)) == Set(names) && evaluator.schedule.deadline == nil)
    }

    @Test("the timer makes the retry by itself, half a second after the failure")
    @LoopActor func timerFires() async throws {
        let (evaluator, _, resolver, sink) = evaluator()
        let host = WatchedTarget(.host("example.com"))
        sink.targets = [host]
        evaluator.networkChanged()
        let failed = MonotonicClock.microseconds()
        resolver.fail("example.com", Self.temporaryFailure, temporary: true)
        var giveUp: SourceHandle?
        let retried = await withCheckedContinuation { (done: CheckedContinuation<Bool, Never>) in
            var resumed = false
            func finish(_ retried: Bool) {
                guard !resumed else { return }
                resumed = true
                done.resume(returning: retried)
            }
            resolver.onLookup = { _ in finish(true) }
            giveUp = Sources.after(milliseconds: 5000) { finish(false) }
        }
        giveUp = nil
        resolver.onLookup = nil
        let waited = MonotonicClock.microseconds() - failed
        #expect(retried, "no retry within 5 s")
        #expect(waited >= 450_000 && waited < 2_000_000, "retried after \(waited) µs")
        #expect(resolver.pending.count == 1 && evaluator.schedule.deadline == nil)
        _ = giveUp
    }

    @Test("each kind: its Kind, name, input and log name; the unspecified address is the internet, kept as asked")
    @LoopActor func kinds() throws {
        let zero = try IPAddress(parsing: "0.0.0.0")
        let local = try IPAddress(parsing: "192.0.2.10")
        let remote = try IPAddress(parsing: "198.51.100.7")
        let root = WatchedTarget()
        #expect(root.kind == .internet && root.name == "" && root.spec == .internet(nil) && root.logName == "internet")
        #expect(try TargetInput.parseAddress("0.0.0.0") == .internet(zero), "the unspecified address is the internet")
        let unspecified = WatchedTarget(try TargetInput.parseAddress("0.0.0.0"))
        #expect(unspecified.kind == .internet && unspecified.name == "0.0.0.0" && unspecified.logName == "internet")
        #expect(unspecified.spec.holdingCall.arguments == ["0.0.0.0"], "held as the address it was asked as")
        let host = WatchedTarget(.host("example.com"))
        #expect(host.kind == .host && host.name == "example.com" && host.spec == .host("example.com") && host.work != nil)
        let address = WatchedTarget(.address(remote))
        #expect(address.kind == .address && address.name == "198.51.100.7" && address.logName == "198.51.100.7")
        let pair = WatchedTarget(.pair(local: local, remote: remote))
        #expect(pair.kind == .pair && pair.name == "192.0.2.10,198.51.100.7")
        #expect(pair.spec == .pair(local: local, remote: remote) && pair.work == nil)
        #expect(WatchedTarget(.pair(local: nil, remote: remote)).name == ",198.51.100.7")
    }
}
