import Testing
@testable import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop
@testable import ReachabilityPlatform
@testable import ReachabilityService

/// The registry on an object tree (no bus): holding, sharing, release, limits, paths,
/// and the removal of what a departed client held.
@Suite("Targets held, shared and released")
struct TargetRegistryTests {
    init() { LoopThread.start() }

    static let root = "/io/github/reachabilityd/Reachability1"

    @Test("the paths: host/, address/ and pair/ under the root, escaped; 0.0.0.0 is the internet under address/")
    @LoopActor func paths() throws {
        let fixture = DaemonFixture()
        #expect(fixture.watch("Example.COM")?.rawValue == "\(Self.root)/host/example_2ecom")
        #expect(fixture.watch("Example.COM.")?.rawValue == "\(Self.root)/host/example_2ecom_2e", "absolute: another target")
        #expect(fixture.watch("127.0.0.1")?.rawValue == "\(Self.root)/address/_3127_2e0_2e0_2e1")
        guard case .success(let values)? = fixture.call(
            "WatchAddressPair", [.string("192.0.2.10"), .string("198.51.100.7")]).first
        else {
            Issue.record("WatchAddressPair refused")
            return
        }
        #expect(values == [.objectPath(ObjectPath(rawValue: "\(Self.root)/pair/_3192_2e0_2e2_2e10_2c198_2e51_2e100_2e7")!)])

        let zero = try #require(fixture.watch("0.0.0.0"))
        #expect(zero.rawValue == "\(Self.root)/address/_30_2e0_2e0_2e0")
        #expect(fixture.property("Kind", at: zero) == .string("internet"))
        #expect(fixture.property("Name", at: zero) == .string("0.0.0.0"))
        #expect(fixture.property("Kind", at: try #require(fixture.watch("example.com"))) == .string("host"))
        #expect(fixture.registry.objects.count == 5)
    }

    @Test("one object per normalised target, shared; each new holder is told, and sees only its own holdings")
    @LoopActor func sharing() throws {
        let fixture = DaemonFixture()
        let path = try #require(fixture.watch("Example.COM", from: ":1.10", as: 1000))
        #expect(fixture.watch("example.com", from: ":1.11", as: 1001) == path)
        #expect(fixture.watch("example.com", from: ":1.11", as: 1001) == path, "held twice: still one hold")
        #expect(fixture.registry.objects.count == 1 && fixture.tree.object(at: path) != nil)
        let added = fixture.signals(about: path).filter { $0.name == "InterfacesAdded" }
        #expect(added.map(\.destinations) == [[":1.10"], [":1.11"]], "each holder once, when it starts holding")
        #expect(fixture.registry.holdings(seenBy: 0).map(\.client) == [":1.10", ":1.11"])
        #expect(fixture.registry.holdings(seenBy: 1001).map(\.client) == [":1.11"])
        #expect(fixture.resolver.lookups.count == 1, "one lookup for the shared name")
        #expect(fixture.resolver.lookups.first?.owner == 1000, "charged to the first holder")
    }

    @Test("release: a holder that is not the last is told alone; the last takes the object away; an unheld path is refused")
    @LoopActor func release() throws {
        let fixture = DaemonFixture()
        let path = try #require(fixture.watch("198.51.100.80", from: ":1.10"))
        _ = fixture.watch("198.51.100.80", from: ":1.11", as: 1001)
        fixture.signals.removeAll()

        #expect(try fixture.call("Release", [.objectPath(path)], from: ":1.11", as: 1001).first?.get() == [])
        #expect(fixture.signals.map(\.name) == ["InterfacesRemoved"] && fixture.signals.first?.destinations == [":1.11"])
        #expect(fixture.tree.object(at: path) != nil)
        guard case .failure(let error)? = fixture.call("Release", [.objectPath(path)], from: ":1.11", as: 1001).first else {
            Issue.record("a release of a target no longer held was accepted")
            return
        }
        #expect(error.name == ServiceNames.Error.unknownTarget)

        #expect(try fixture.call("Release", [.objectPath(path)], from: ":1.10").first?.get() == [])
        #expect(fixture.tree.object(at: path) == nil && fixture.registry.objects.isEmpty)
        #expect(fixture.signals.last?.name == "InterfacesRemoved" && fixture.signals.last?.destinations == [":1.10"])
    }

    @Test("limits: a client over its limit is refused with TooManyTargets; others are not")
    @LoopActor func limits() throws {
        let fixture = DaemonFixture(perClientLimit: 2)
        #expect(fixture.watch("192.0.2.1") != nil && fixture.watch("192.0.2.2") != nil)
        guard case .failure(let error)? = fixture.call("WatchHost", [.string("192.0.2.3")]).first else {
            Issue.record("a third target was accepted")
            return
        }
        #expect(error.name == ServiceNames.Error.tooManyTargets)
        #expect(fixture.watch("192.0.2.1") != nil, "one it holds already is no new target")
        #expect(fixture.watch("192.0.2.3", from: ":1.11", as: 1001) != nil)
        #expect(fixture.registry.objects.count == 3)
    }

    @Test("a client over its limit is a notice once, with its event and the journal's fields as metadata")
    @LoopActor func overLimitNotice() {
        let fixture = DaemonFixture(perClientLimit: 1)
        #expect(fixture.watch("192.0.2.1") != nil)
        #expect(fixture.watch("192.0.2.2") == nil && fixture.watch("192.0.2.3") == nil)
        let notices = fixture.log.records.entries.filter { $0.metadata[Log.Event.metadataKey] != nil }
            .filter { $0.metadata[Log.Event.metadataKey] != "\(Log.Event.internetChanged.id)" }
        #expect(notices.count == 1, "once per client: \(notices)")
        #expect(notices.first?.level == .notice)
        let notice = notices.first
        #expect(notice.map { "\($0.message)".hasPrefix(":1.10 (uid 1000) is over its limit: ") } == true)
        #expect(notice?.metadata[Log.Event.metadataKey] == "\(Log.Event.clientOverLimit.id)")
        #expect(notice?.metadata["client"] == ":1.10" && notice?.metadata["target"] == "192.0.2.2")
        #expect(notice?.metadata["uid"] == "1000" && notice?.metadata.count == 4, "\(notice?.metadata ?? [:])")
    }

    @Test("a client that leaves releases everything; the orphans go a batch at a time, one held again stays")
    @LoopActor func orphans() async throws {
        let fixture = DaemonFixture()
        let count = TargetRegistry.removalBatch + 10
        let paths = (0..<count).compactMap { fixture.watch("10.0.\($0 / 256).\($0 % 256)") }
        let kept = try #require(fixture.watch("10.0.0.5", from: ":1.11", as: 1001))
        let again = paths[7]
        #expect(paths.count == count && fixture.registry.objects.count == count)

        fixture.signals.removeAll()
        fixture.registry.releaseAll(client: ":1.10")
        #expect(fixture.registry.objects.count == count, "removed later, between other calls")
        _ = fixture.watch("10.0.0.7", from: ":1.12", as: 1002)  // held again before its removal
        // An idle source after the first batch's (the next batch is added while it runs).
        var afterFirstBatch = 0
        var handle: SourceHandle?
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            handle = Sources.idle { [fixture] in
                afterFirstBatch = fixture.registry.objects.count
                done.resume()
            }
        }
        _ = handle
        #expect(afterFirstBatch == count - TargetRegistry.removalBatch)
        await fixture.idle()
        #expect(Set(fixture.registry.objects.values.compactMap(\.exported?.path)) == [kept, again])
        #expect(fixture.signals.allSatisfy { $0.name != "InterfacesRemoved" }, "nobody is left to tell")
        #expect(fixture.tree.object(at: paths[0]) == nil && fixture.tree.object(at: again) != nil)
    }

    @Test("looked-up targets are counted as they come and go; the refresh timer follows them")
    @LoopActor func hostCount() throws {
        let fixture = DaemonFixture()
        let host = try #require(fixture.watch("example.com"))
        _ = fixture.watch("198.51.100.80")
        _ = fixture.call("WatchAddressPair", [.string(""), .string("198.51.100.80")])
        #expect(fixture.registry.hostCount == 1 && fixture.evaluator.refreshTimer != nil)
        _ = fixture.call("Release", [.objectPath(host)])
        #expect(fixture.registry.hostCount == 0 && fixture.evaluator.refreshTimer == nil)
        #expect(fixture.resolver.lookups.first?.isCancelled == true, "its lookup in flight is dropped")
    }
}
