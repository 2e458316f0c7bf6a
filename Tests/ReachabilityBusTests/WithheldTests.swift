import Testing
@testable import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop
import ReachabilityTestSupport

/// Level-triggered delivery, with no bus: what a listener that has fallen behind is
/// sent once it reads again.
@Suite("A listener that falls behind gets the current state, nothing lost")
struct WithheldTests {
    init() { LoopThread.start() }

    final class Thing {
        var flags: UInt32 = 2
        var name = "a"
    }

    nonisolated static let changed = Signal("Changed", signature: "u")
    nonisolated static let poked = Signal("Poked", signature: "")

    static let interface = Interface<Thing>(
        "org.example.Thing", methods: [],
        properties: [Property("Flags", "u") { .uint32($0.flags) }, Property("Name", "s") { .string($0.name) }],
        signals: [changed, poked], followUp: FollowUp(changed, arguments: ["Flags"]),
        introspection: "  <interface name=\"org.example.Thing\"/>")

    @LoopActor
    final class Listeners: ObjectAudience {
        var names: [String]
        init(_ names: [String]) { self.names = names }
        func admits(_ user: UserID) -> Bool { true }
        var listeners: [String] { names }
    }

    nonisolated static let root = ObjectPath("/org/example")
    nonisolated static let path = ObjectPath("/org/example/thing")

    /// `:1.1` reads; `:1.2` is behind while `behind` says so.
    @LoopActor
    final class Fixture {
        let tree = ObjectTree(machineID: { "0123456789abcdef0123456789abcdef" }, logger: recordingLogger().logger)
        let thing = Thing()
        let audience = Listeners([":1.1", ":1.2"])
        var behind: Set<String> = []
        /// (destination, member, values)
        var sent: [(String, String, [DBusValue])] = []
        var object: ExportedObject!

        init() {
            tree.emit = { [unowned self] _, _, name, values, destinations in
                for d in destinations ?? ["*"] { self.sent.append((d, name, values)) }
            }
            tree.isBehind = { [unowned self] in self.behind.contains($0) }
            tree.addObjectManager(at: WithheldTests.root)
            object = export()
        }

        func export() -> ExportedObject {
            tree.export(at: WithheldTests.path, interfaces: [WithheldTests.interface.bound(to: thing)],
                        audience: audience)
        }

        func take(_ peer: String) -> [(String, [DBusValue])] {
            let mine = sent.filter { $0.0 == peer }.map { ($0.1, $0.2) }
            sent.removeAll { $0.0 == peer }
            return mine
        }

        func members(_ peer: String) -> [String] { take(peer).map(\.0) }
    }

    @Test("a reading listener gets every change; a behind one gets only what differs, once, when it reads")
    @LoopActor func coalesced() {
        let f = Fixture()
        f.sent.removeAll()
        f.behind = [":1.2"]
        for flags: UInt32 in [0, 2, 0] {
            f.thing.flags = flags
            f.object.propertiesChanged()
        }
        #expect(f.members(":1.1") == ["PropertiesChanged", "Changed", "PropertiesChanged", "Changed",
                                      "PropertiesChanged", "Changed"])
        #expect(f.members(":1.2").isEmpty)
        #expect(f.tree.withheldCount(for: ":1.2") == 1)
        f.behind = []
        f.tree.resume(":1.2")
        let caughtUp = f.take(":1.2")
        #expect(caughtUp.map(\.0) == ["PropertiesChanged", "Changed"])
        // Only the property that differs from what it was told, with its current value.
        #expect(caughtUp.first?.1 == [.string("org.example.Thing"), .vardict([("Flags", .uint32(0))]), .strings([])])
        #expect(caughtUp.last?.1 == [.uint32(0)])
        #expect(!f.tree.isWithholding(from: ":1.2"))
    }

    @Test("a change undone while the listener was behind sends it nothing")
    @LoopActor func undone() {
        let f = Fixture()
        f.sent.removeAll()
        f.behind = [":1.2"]
        f.thing.flags = 0
        f.object.propertiesChanged()
        f.thing.flags = 2
        f.object.propertiesChanged()
        f.behind = []
        f.tree.resume(":1.2")
        #expect(f.members(":1.2").isEmpty)
    }

    @Test("a property other than the follow-up's differs: PropertiesChanged alone")
    @LoopActor func noFollowUp() {
        let f = Fixture()
        f.sent.removeAll()
        f.behind = [":1.2"]
        f.thing.name = "b"
        f.object.propertiesChanged()
        f.behind = []
        f.tree.resume(":1.2")
        #expect(f.members(":1.2") == ["PropertiesChanged"])
    }

    @Test("added, removed, or added and removed while behind")
    @LoopActor func addedAndRemoved() {
        let f = Fixture()
        f.sent.removeAll()
        f.behind = [":1.2"]
        // Removed while behind: it hears of it once it reads.
        f.tree.unexport(WithheldTests.path)
        f.behind = []
        f.tree.resume(":1.2")
        #expect(f.members(":1.2") == ["InterfacesRemoved"])
        // Added while behind: InterfacesAdded with the current properties once it reads.
        f.behind = [":1.2"]
        f.thing.flags = 0
        f.object = f.export()
        f.behind = []
        f.tree.resume(":1.2")
        let added = f.take(":1.2")
        #expect(added.map(\.0) == ["InterfacesAdded"])
        let properties = "\(added.first?.1 ?? [])"
        #expect(properties.contains("uint32(0)"))
        // Added and removed while behind: nothing.
        f.behind = [":1.2"]
        f.tree.unexport(WithheldTests.path)
        f.object = f.export()
        f.tree.unexport(WithheldTests.path)
        f.behind = []
        f.tree.resume(":1.2")
        // It knew the object (added above): it hears it is gone, once.
        #expect(f.members(":1.2") == ["InterfacesRemoved"])
    }

    @Test("an owed signal is sent with its latest arguments; a listener that leaves costs nothing more")
    @LoopActor func owedAndForgotten() {
        let f = Fixture()
        f.sent.removeAll()
        f.behind = [":1.2"]
        f.object.emit(WithheldTests.poked, interface: "org.example.Thing", [])
        f.object.emit(WithheldTests.poked, interface: "org.example.Thing", [])
        #expect(f.members(":1.1") == ["Poked", "Poked"])
        f.behind = []
        f.tree.resume(":1.2")
        #expect(f.members(":1.2") == ["Poked"])
        f.behind = [":1.2"]
        f.thing.flags = 0
        f.object.propertiesChanged()
        f.tree.forgetWithheld(":1.2")
        f.behind = []
        f.tree.resume(":1.2")
        #expect(f.members(":1.2").isEmpty)
    }

    @Test("catching up stops when the listener falls behind again, and goes on at its next turn")
    @LoopActor func resumesInTurns() {
        let f = Fixture()
        let others = (0..<10).map { ObjectPath(rawValue: "/org/example/t\($0)")! }
        for p in others {
            f.tree.export(at: p, interfaces: [WithheldTests.interface.bound(to: f.thing)], audience: f.audience)
        }
        f.sent.removeAll()
        f.behind = [":1.2"]
        f.thing.flags = 0
        for p in others { f.tree.object(at: p)!.propertiesChanged() }
        #expect(f.tree.withheldCount(for: ":1.2") == 10)
        // It reads, but falls behind again after its first catch-up.
        f.behind = []
        var sentBefore = 0
        f.tree.isBehind = { [unowned f] peer in
            peer == ":1.2" && f.sent.filter { $0.0 == ":1.2" }.count > sentBefore
        }
        f.tree.resume(":1.2")
        #expect(f.members(":1.2") == ["PropertiesChanged", "Changed"])
        #expect(f.tree.withheldCount(for: ":1.2") == 9)
        sentBefore = 0
        f.tree.isBehind = { _ in false }
        f.tree.resume(":1.2")
        #expect(f.members(":1.2").count == 18)
        #expect(!f.tree.isWithholding(from: ":1.2"))
    }
}
