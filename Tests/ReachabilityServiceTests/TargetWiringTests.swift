import Testing
@testable import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop
@testable import ReachabilityPlatform
@testable import ReachabilityService

/// What the daemon glues together (`TargetWiring`, the evaluator's sink), on an object
/// tree with no bus: evaluations reach the exported objects, lookups reach their
/// hosts' objects, and a new target is exported with its real first state.
@Suite("The daemon's targets wired to the evaluator")
struct TargetWiringTests {
    init() { LoopThread.start() }

    static let reachable = DBusValue.int32(ReachabilityStatus.reachableViaWiFi.rawValue)
    static let notReachable = DBusValue.int32(ReachabilityStatus.notReachable.rawValue)
    static let unknown = DBusValue.int32(ReachabilityStatus.unknown.rawValue)

    @Test("a new target is evaluated before it is exported: InterfacesAdded carries its real state, nothing follows")
    @LoopActor func firstStateBeforeExport() throws {
        let fixture = DaemonFixture()
        let path = try #require(fixture.watch("198.51.100.80"))
        let told = fixture.signals(about: path)
        #expect(told.map(\.name) == ["InterfacesAdded"], "no change announced after it")
        #expect(told.first.flatMap { DaemonFixture.added("Status", in: $0) } == Self.reachable)
        #expect(told.first.flatMap { DaemonFixture.added("Interface", in: $0) } == .string("kveth0"))
    }

    @Test("an evaluation's change reaches the objects: PropertiesChanged then StatusChanged, to the holders")
    @LoopActor func evaluationReachesObjects() throws {
        let fixture = DaemonFixture()
        let path = try #require(fixture.watch("198.51.100.80", from: ":1.10"))
        _ = fixture.watch("198.51.100.80", from: ":1.11", as: 1001)
        fixture.signals.removeAll()

        fixture.network.route("198.51.100.80", nil)
        fixture.evaluator.networkChanged()
        let told = fixture.signals(about: path)
        #expect(told.map(\.name) == ["PropertiesChanged", "StatusChanged"])
        #expect(told.allSatisfy { Set($0.destinations ?? []) == [":1.10", ":1.11"] }, "its holders only")
        #expect(told.last?.values == [Self.notReachable, .uint32(0)])
        #expect(fixture.property("Status", at: path) == Self.notReachable)
        #expect(fixture.signals(about: Names.rootPath).isEmpty, "the internet did not change")

        // The internet's routes go: the root object tells everybody.
        for address in ["8.8.8.8", "1.1.1.1", "9.9.9.9"] { fixture.network.route(address, nil) }
        fixture.evaluator.networkChanged()
        let root = fixture.signals(about: Names.rootPath)
        #expect(root.map(\.name) == ["PropertiesChanged", "StatusChanged"] && root.allSatisfy { $0.destinations == nil })
        #expect(fixture.property("Status", at: Names.rootPath) == Self.notReachable)
    }

    @Test("each change of the internet's answer is one notice, with its event, reason and interface (the lost one's when it has none) as metadata")
    @LoopActor func internetNotice() {
        let fixture = DaemonFixture()
        for address in ["8.8.8.8", "1.1.1.1", "9.9.9.9"] { fixture.network.route(address, nil) }
        fixture.evaluator.networkChanged()
        fixture.evaluator.networkChanged()
        let notices = fixture.log.records.entries.filter { $0.level == .notice }
        let state = fixture.internet.target.state
        #expect(state.reason != nil)
        #expect(notices.map { "\($0.message)" } == ["internet: reachable via kveth0", "internet: \(state.summary)"])
        #expect(notices.allSatisfy { $0.metadata[Log.Event.metadataKey] == "\(Log.Event.internetChanged.id)" })
        #expect(notices.first?.metadata["reason"] == "" && notices.first?.metadata["interface"] == "kveth0")
        #expect(notices.last?.metadata["reason"] == "\(state.reason?.rawValue ?? "")")
        #expect(state.interface.isEmpty && notices.last?.metadata["interface"] == "kveth0",
                "a lost route's record names the interface it went through")
        #expect(notices.last?.metadata.count == 3, "\(notices.last?.metadata ?? [:])")
    }

    @Test("a host is exported unknown while its first lookup runs; the answer reaches its object")
    @LoopActor func lookupReachesObject() throws {
        let fixture = DaemonFixture()
        let path = try #require(fixture.watch("example.com", as: 1000))
        #expect(fixture.signals(about: path).first.flatMap { DaemonFixture.added("Status", in: $0) } == Self.unknown)
        #expect(fixture.resolver.pending.map(\.host) == ["example.com"] && fixture.resolver.pending.first?.owner == 1000)
        fixture.signals.removeAll()

        #expect(fixture.resolver.answer("example.com", ["198.51.100.80"]))
        #expect(fixture.signals(about: path).map(\.name) == ["PropertiesChanged", "StatusChanged"])
        #expect(fixture.property("Status", at: path) == Self.reachable)
        #expect(fixture.property("Addresses", at: path) == .strings(["198.51.100.80"]))

        // A failed lookup is an answer too, in the resolver's words.
        fixture.evaluator.networkChanged()
        #expect(fixture.resolver.fail("example.com", "Name or service not known"))
        #expect(fixture.property("Status", at: path) == Self.notReachable)
        #expect(fixture.property("Error", at: path) == .string("Name or service not known"))
        #expect(fixture.property("Reason", at: path) == .string(Reason.lookupFailed.rawValue))
    }

    @Test("a host whose lookup fails for now is looked up again by itself, in its owner's turn; released, it is owed nothing")
    @LoopActor func temporaryFailureRetried() throws {
        let fixture = DaemonFixture()
        let temporary = "Temporary failure in name resolution"
        let path = try #require(fixture.watch("example.com", as: 1000))
        #expect(fixture.resolver.fail("example.com", temporary, temporary: true))
        #expect(fixture.property("Status", at: path) == Self.notReachable)
        #expect(fixture.property("Error", at: path) == .string(temporary))
        fixture.signals.removeAll()

        // Nobody calls anything: the retry's answer reaches the object and its holders.
        fixture.evaluator.schedule.makeDue(now: try #require(fixture.evaluator.schedule.deadline))
        #expect(fixture.resolver.pending.map(\.owner) == [1000])
        #expect(fixture.resolver.answer("example.com", ["198.51.100.80"]))
        #expect(fixture.property("Status", at: path) == Self.reachable)
        #expect(fixture.signals(about: path).map(\.name) == ["PropertiesChanged", "StatusChanged"])

        fixture.evaluator.networkChanged()
        #expect(fixture.resolver.fail("example.com", temporary, temporary: true))
        #expect(fixture.evaluator.schedule.count == 1)
        _ = fixture.call("Release", [.objectPath(path)])
        #expect(fixture.evaluator.schedule.count == 0 && fixture.evaluator.schedule.deadline == nil)
    }

    @Test("Refresh of a host answers once its new lookup is done; of an address, at once")
    @LoopActor func refresh() throws {
        let fixture = DaemonFixture()
        let host = try #require(fixture.watch("example.com"))
        fixture.resolver.answer("example.com", ["192.0.2.99"])  // no route to it
        let address = try #require(fixture.watch("198.51.100.80"))

        let immediate = fixture.call("Refresh", at: address, interface: Names.targetInterface)
        #expect(try immediate.first?.get() == [.uint32(ReachabilityFlags.reachable.rawValue), Self.reachable])

        let waiting = fixture.call("Refresh", at: host, interface: Names.targetInterface)
        let joined = fixture.call("Refresh", at: host, interface: Names.targetInterface, from: ":1.11", as: 0)
        #expect(waiting.all.isEmpty && joined.all.isEmpty, "both wait for the lookup")
        #expect(fixture.resolver.pending.count == 1, "one lookup for both")
        fixture.resolver.answer("example.com", ["198.51.100.80"])
        #expect(try waiting.first?.get() == [.uint32(ReachabilityFlags.reachable.rawValue), Self.reachable])
        #expect(try joined.first?.get() == [.uint32(ReachabilityFlags.reachable.rawValue), Self.reachable])
    }

    @Test("Query of an unwatched host looks it up once for the caller; the caller's departure drops it")
    @LoopActor func query() throws {
        let fixture = DaemonFixture()
        let answered = fixture.call("Query", [.string("once.example")], from: ":1.20", as: 1234)
        #expect(answered.all.isEmpty && fixture.resolver.pending.map(\.owner) == [1234])
        fixture.resolver.answer("once.example", ["198.51.100.80"])
        guard case .success(let values)? = answered.first else {
            Issue.record("no answer to Query")
            return
        }
        #expect(Array(values.prefix(2)) == [.uint32(ReachabilityFlags.reachable.rawValue), Self.reachable])
        #expect(fixture.registry.objects.isEmpty, "no object for a query")

        let left = fixture.call("Query", [.string("gone.example")], from: ":1.21", as: 1234)
        fixture.requests.releaseAll(client: ":1.21")
        #expect(fixture.resolver.lookups.last?.isCancelled == true)
        #expect(!left.all.contains { (try? $0.get()) != nil }, "never answered (the call fails as it goes)")
    }

    @Test("whose answers a target's views are: its holders' users; nobody's for the root's internet")
    @LoopActor func holdingUsers() throws {
        let fixture = DaemonFixture()
        _ = fixture.watch("198.51.100.80", from: ":1.10", as: 1000)
        _ = fixture.watch("198.51.100.80", from: ":1.11", as: 1001)
        let target = try #require(fixture.registry.object(for: .address(try IPAddress(parsing: "198.51.100.80"))))
        #expect(Set(fixture.wiring.holdingUsers(of: target.target)) == [1000, 1001])
        #expect(fixture.wiring.holdingUsers(of: fixture.internet.target).isEmpty)
        #expect(fixture.wiring.evaluatedTargets.count == 2, "the internet and the address")
    }

    @Test("the daemon hears the rest: the facts, the end of each evaluation")
    @LoopActor func restGoesToTheDaemon() {
        @LoopActor final class Daemon: EvaluationEvents {
            var backends: [BackendKind] = []
            var evaluations = 0
            func factsReloaded(_ facts: NetworkFacts) { backends.append(facts.backend) }
            func pathChanged(_ state: PathState) {}
            func evaluationFinished() { evaluations += 1 }
            var invalidations: [InvalidationReason] = []
            func invalidated(_ reason: InvalidationReason) { invalidations.append(reason) }
        }
        let fixture = DaemonFixture()
        let daemon = Daemon()
        fixture.wiring.daemon = daemon
        fixture.evaluator.networkChanged()
        #expect(daemon.backends == [.kernel] && daemon.evaluations == 1)
        fixture.evaluator.resumed("a test")
        #expect(daemon.invalidations == [.resumed] && daemon.evaluations == 2, "a resume: everything again, then told once")
    }
}
