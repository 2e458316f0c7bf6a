import Testing
@testable import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop
import ReachabilityTestSupport

/// Objects with an audience, with no bus: who sees them, who hears them.
@Suite("Objects seen by their audience only")
struct VisibilityTests {
    init() { LoopThread.start() }

    final class Thing {}

    static let interface = Interface<Thing>(
        "org.example.Thing", methods: [Method("Echo", input: "", output: "") { _, _ in [] }],
        properties: [Property("Flags", "u") { _ in .uint32(1) }], signals: [],
        introspection: "  <interface name=\"org.example.Thing\"/>")

    /// Seen by user 4242, heard by ":1.7".
    @LoopActor
    final class Holders: ObjectAudience {
        func admits(_ user: UserID) -> Bool { user == 4242 }
        var listeners: [String] { [":1.7"] }
    }

    @LoopActor
    final class Recorder: CallResponder {
        var answers: [String] = []
        var values: [[DBusValue]] = []
        func send(reply values: [DBusValue], to call: MethodCall) {
            answers.append("reply")
            self.values.append(values)
        }
        func send(error: BusError, to call: MethodCall) { answers.append(error.name) }
    }

    nonisolated static let root = ObjectPath("/org/example")
    nonisolated static let held = ObjectPath("/org/example/host/held")
    nonisolated static let open = ObjectPath("/org/example/public")

    @LoopActor
    final class Fixture {
        let tree = ObjectTree(machineID: { "0123456789abcdef0123456789abcdef" }, logger: recordingLogger().logger)
        let thing = Thing()
        let holders = Holders()
        var signals: [(String, [String]?)] = []
        init() {
            tree.emit = { [unowned self] _, _, name, _, destinations in self.signals.append((name, destinations)) }
            tree.addObjectManager(at: VisibilityTests.root)
            tree.export(at: VisibilityTests.root, interfaces: [VisibilityTests.interface.bound(to: thing)])
            tree.export(at: VisibilityTests.open, interfaces: [VisibilityTests.interface.bound(to: thing)])
            tree.export(at: VisibilityTests.held, interfaces: [VisibilityTests.interface.bound(to: thing)],
                        audience: holders)
        }

        func call(_ path: ObjectPath, _ interface: String, _ member: String, user: UserID,
                  _ arguments: [DBusValue] = []) -> (String, [DBusValue]?) {
            let recorder = Recorder()
            do {
                let call = MethodCall(responder: recorder, sender: ":1.9", path: path, interface: interface,
                                      member: member, arguments: arguments, logger: tree.logger)
                call.user = user
                Dispatcher.dispatch(call, in: tree)
            }
            return (recorder.answers.first ?? "none", recorder.values.first)
        }

        func managedPaths(user: UserID) -> [String] {
            let (_, values) = call(VisibilityTests.root, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects",
                                   user: user)
            guard case .dictionary(_, _, let entries)? = values?.first else { return [] }
            return entries.compactMap { $0.key.stringValue }
        }

        func introspect(_ path: ObjectPath, user: UserID) -> String {
            let (_, values) = call(path, "org.freedesktop.DBus.Introspectable", "Introspect", user: user)
            return values?.first?.stringValue ?? ""
        }
    }

    @Test("another user is answered as if the object did not exist; its holders' user and root see it")
    @LoopActor func unknownToOthers() {
        let fixture = Fixture()
        let get: [DBusValue] = [.string("org.example.Thing"), .string("Flags")]
        #expect(fixture.call(Self.held, "org.freedesktop.DBus.Properties", "Get", user: 65534, get).0
                == "org.freedesktop.DBus.Error.UnknownObject")
        #expect(fixture.call(Self.held, "org.example.Thing", "Echo", user: 65534).0
                == "org.freedesktop.DBus.Error.UnknownObject")
        #expect(fixture.call(Self.held, "", "Echo", user: 65534).0 == "org.freedesktop.DBus.Error.UnknownObject")
        #expect(fixture.call(Self.held, "org.freedesktop.DBus.Properties", "Get", user: 4242, get).0 == "reply")
        #expect(fixture.call(Self.held, "org.freedesktop.DBus.Properties", "Get", user: 0, get).0 == "reply")
        // A public object is everybody's.
        #expect(fixture.call(Self.open, "org.freedesktop.DBus.Properties", "Get", user: 65534, get).0 == "reply")
    }

    @Test("GetManagedObjects and introspection list what the caller's user may see")
    @LoopActor func listings() {
        let fixture = Fixture()
        #expect(fixture.managedPaths(user: 65534) == [Self.open.rawValue])
        #expect(fixture.managedPaths(user: 4242) == [Self.held.rawValue, Self.open.rawValue])
        #expect(fixture.managedPaths(user: 0) == [Self.held.rawValue, Self.open.rawValue])
        #expect(!fixture.introspect(Self.root, user: 65534).contains("<node name=\"host\"/>"))
        #expect(fixture.introspect(Self.root, user: 4242).contains("<node name=\"host\"/>"))
        #expect(fixture.introspect(ObjectPath("/org/example/host"), user: 4242).contains("<node name=\"held\"/>"))
        // Introspecting the object itself as another user shows a node with no interface of its own.
        let hidden = fixture.introspect(Self.held, user: 65534)
        let shown = fixture.introspect(Self.held, user: 4242)
        #expect(!hidden.contains("org.example.Thing") && !hidden.contains("org.freedesktop.DBus.Properties"))
        #expect(shown.contains("org.example.Thing"))
        #expect(hidden == fixture.introspect(ObjectPath("/org/example/host/nothing"), user: 65534))
    }

    @Test("an object's signals go to its listeners; a public object's are broadcast")
    @LoopActor func signals() {
        let fixture = Fixture()
        let added = fixture.signals.filter { $0.0 == "InterfacesAdded" }
        #expect(added.count == 2)
        #expect(added[0].1 == nil, "the public object is announced to everybody")
        #expect(added[1].1 == [":1.7"], "the held object is announced to its holders")
        fixture.tree.announceAdded(Self.held, to: [":1.8"])
        #expect(fixture.signals.last?.1 == [":1.8"])
        fixture.tree.unexport(Self.held, to: [":1.8"])
        #expect(fixture.signals.last?.0 == "InterfacesRemoved" && fixture.signals.last?.1 == [":1.8"])
        fixture.tree.unexport(Self.open)
        #expect(fixture.signals.last?.0 == "InterfacesRemoved" && fixture.signals.last?.1 == nil)
    }
}
