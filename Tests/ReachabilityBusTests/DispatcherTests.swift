import Testing
@testable import ReachabilityBus
import ReachabilityLoop
import ReachabilityTestSupport

/// The dispatcher and the standard interfaces, with no bus: calls are made by
/// hand and their answers recorded.
@Suite("Dispatcher")
struct DispatcherTests {
    /// The tree and the dispatcher live on the loop; so do the tests (started here: a test
    /// isolated to the loop waits for it).
    init() { LoopThread.start() }

    final class Thing {
        var flags: UInt32 = 3
    }

    static let interface = Interface<Thing>(
        "org.example.Thing",
        methods: [
            Method("Echo", input: "s", output: "s") { _, call throws(BusError) in [.string(try call.string(0))] },
            Method("Later", input: "", output: "u") { _, _ in nil },
            // A table whose handler reads more than its declaration: the argument accessors catch it.
            Method("Greedy", input: "s", output: "s") { _, call throws(BusError) in [.string(try call.string(3))] },
            // A handler whose reply is not what it declares.
            Method("Wrong", input: "", output: "s") { _, _ in [.uint32(1)] },
        ],
        properties: [Property("Flags", "u") { .uint32($0.flags) }],
        signals: [Signal("Changed", signature: "u")],
        introspection: "  <interface name=\"org.example.Thing\"/>")

    /// What a call was answered with.
    enum Answer: Equatable {
        case reply([DBusValue])
        case error(String)
    }

    @LoopActor
    final class Recorder: CallResponder {
        var answers: [Answer] = []
        func send(reply values: [DBusValue], to call: MethodCall) { answers.append(.reply(values)) }
        func send(error: BusError, to call: MethodCall) { answers.append(.error(error.name)) }
    }

    nonisolated static let root = ObjectPath("/org/example")
    nonisolated static let child = ObjectPath("/org/example/child")
    nonisolated static let nowhere = ObjectPath("/org/example/nowhere")
    nonisolated static let between = ObjectPath("/org")

    /// A tree with a manager object at `root` and a plain object at `child`.
    @LoopActor
    final class Fixture {
        /// The tree's own log.
        let log = recordingLogger()
        let tree: ObjectTree
        let thing = Thing()
        var signals: [(ObjectPath, String, String)] = []
        init() {
            tree = ObjectTree(machineID: { "0123456789abcdef0123456789abcdef" }, logger: log.logger)
            tree.emit = { [unowned self] path, interface, name, _, _ in self.signals.append((path, interface, name)) }
            tree.addObjectManager(at: DispatcherTests.root)
            tree.export(at: DispatcherTests.root, interfaces: [DispatcherTests.interface.bound(to: thing)])
            tree.export(at: DispatcherTests.child, interfaces: [DispatcherTests.interface.bound(to: thing)])
        }

        /// Dispatches one call and returns its one answer (recording a failure if it got none or several).
        func call(_ path: ObjectPath, _ interface: String, _ member: String, _ arguments: [DBusValue] = [])
            -> Answer?
        {
            let recorder = Recorder()
            do {
                let call = MethodCall(responder: recorder, sender: ":1.1", path: path, interface: interface,
                                      member: member, arguments: arguments, logger: tree.logger)
                Dispatcher.dispatch(call, in: tree)
            }
            #expect(recorder.answers.count == 1, "\(interface).\(member) at \(path): \(recorder.answers)")
            return recorder.answers.first
        }
    }

    static let properties = "org.freedesktop.DBus.Properties"
    @LoopActor static let standard = StandardInterface.allCases.map(\.name)

    @Test("GetAll of a standard interface an object implements is an empty dictionary",
          arguments: [root, child])
    @LoopActor func getAllStandard(path: ObjectPath) {
        let fixture = Fixture()
        for interface in fixture.tree.standardInterfaces(at: path, for: 0) {
            #expect(fixture.call(path, Self.properties, "GetAll", [.string(interface.name)]) == .reply([.vardict([])]))
        }
        // ObjectManager is the root's only.
        #expect(fixture.call(Self.child, Self.properties, "GetAll", [.string(StandardInterface.objectManager.name)])
            == .error(BusError.prefix + "UnknownInterface"))
    }

    @Test("Get and Set of a standard interface's property is UnknownProperty, never another interface's value")
    @LoopActor func standardProperties() {
        let fixture = Fixture()
        for interface in ["org.freedesktop.DBus.Peer", "org.freedesktop.DBus.Introspectable", Self.properties] {
            #expect(fixture.call(Self.root, Self.properties, "Get", [.string(interface), .string("Flags")])
                == .error(BusError.prefix + "UnknownProperty"))
            #expect(fixture.call(Self.root, Self.properties, "Set",
                                 [.string(interface), .string("Flags"), .variant(.uint32(1))])
                == .error(BusError.prefix + "UnknownProperty"))
        }
    }

    @Test("Properties of the object's own interfaces")
    @LoopActor func ownProperties() {
        let fixture = Fixture()
        let flags = DBusValue.vardict([("Flags", .uint32(3))])
        #expect(fixture.call(Self.child, Self.properties, "Get", [.string("org.example.Thing"), .string("Flags")])
            == .reply([.variant(.uint32(3))]))
        #expect(fixture.call(Self.child, Self.properties, "Get", [.string(""), .string("Flags")])
            == .reply([.variant(.uint32(3))]))
        #expect(fixture.call(Self.child, Self.properties, "GetAll", [.string("org.example.Thing")]) == .reply([flags]))
        #expect(fixture.call(Self.child, Self.properties, "GetAll", [.string("")]) == .reply([flags]))
        #expect(fixture.call(Self.child, Self.properties, "Set",
                             [.string("org.example.Thing"), .string("Flags"), .variant(.uint32(0))])
            == .error(BusError.prefix + "PropertyReadOnly"))
        #expect(fixture.call(Self.child, Self.properties, "Get", [.string("org.example.Thing"), .string("Nope")])
            == .error(BusError.prefix + "UnknownProperty"))
        #expect(fixture.call(Self.child, Self.properties, "GetAll", [.string("org.example.Nope")])
            == .error(BusError.prefix + "UnknownInterface"))
    }

    @Test("a handler reading past its declared arguments gets InvalidArgs, not a crash")
    @LoopActor func greedyHandler() {
        #expect(Fixture().call(Self.child, "org.example.Thing", "Greedy", [.string("x")])
            == .error(BusError.prefix + "InvalidArgs"))
    }

    @Test("a call that is not answered at once is answered with Failed when dropped")
    @LoopActor func unanswered() {
        #expect(Fixture().call(Self.child, "org.example.Thing", "Later") == .error(BusError.prefix + "Failed"))
    }

    @Test("a reply or a signal that does not match its declaration is not sent, and the tree's logger hears why")
    @LoopActor func mismatchLogged() throws {
        let fixture = Fixture()
        #expect(fixture.call(Self.child, "org.example.Thing", "Wrong") == .error(BusError.prefix + "Failed"))
        let object = try #require(fixture.tree.object(at: Self.child))
        let sent = fixture.signals.count
        object.emit(Signal("Changed", signature: "u"), interface: "org.example.Thing", [.string("not a number")])
        object.emit(Signal("Unknown", signature: ""), interface: "org.example.Thing", [])
        #expect(fixture.signals.count == sent)
        let errors = fixture.log.records.entries.filter { $0.level == .error }.map { "\($0.message)" }
        #expect(errors.count == 3, "\(errors)")
        #expect(errors.first?.contains("reply to org.example.Thing.Wrong has signature 'u', declared 's'") == true)
        #expect(errors.dropFirst().first?.contains("org.example.Thing.Changed sent with 's', declared 'u'") == true)
        #expect(errors.last?.contains("does not declare org.example.Thing.Unknown") == true)
    }

    @Test("introspection and Ping answer on every path, the tree's children listed")
    @LoopActor func navigation() throws {
        let fixture = Fixture()
        for path in [Self.root, Self.child, Self.between, Self.nowhere] {
            guard case .reply(let values)? = fixture.call(path, "org.freedesktop.DBus.Introspectable", "Introspect"),
                let xml = values.first?.stringValue
            else {
                Issue.record("no introspection at \(path)")
                continue
            }
            #expect(xml.contains("org.freedesktop.DBus.Peer"))
            #expect(xml.contains("org.example.Thing") == (path == Self.root || path == Self.child))
            #expect(xml.contains("org.freedesktop.DBus.ObjectManager") == (path == Self.root))
            #expect(fixture.call(path, "", "Ping") == .reply([]))
        }
        #expect(fixture.call(Self.between, "", "Introspect").map { if case .reply = $0 { true } else { false } }
            == true)
        #expect(fixture.call(Self.root, "org.freedesktop.DBus.Peer", "GetMachineId")
            == .reply([.string("0123456789abcdef0123456789abcdef")]))
    }

    @Test("ObjectManager announces objects below it and lists them")
    @LoopActor func objectManager() {
        let fixture = Fixture()
        #expect(fixture.signals.map(\.2) == ["InterfacesAdded"])
        guard case .reply(let values)? = fixture.call(Self.root, StandardInterface.objectManager.name,
                                                       "GetManagedObjects"),
            case .dictionary(_, _, let entries)? = values.first
        else {
            Issue.record("GetManagedObjects did not answer")
            return
        }
        #expect(entries.map(\.key) == [.objectPath(Self.child)])
        fixture.tree.unexport(Self.child)
        #expect(fixture.signals.map(\.2) == ["InterfacesAdded", "InterfacesRemoved"])
    }

    /// Every path kind × every interface name × every member name known anywhere × several argument lists:
    /// each call gets exactly one answer, a reply or an error of the specification's names.
    @Test("the surface matrix: one answer, a named error or a reply, for every combination")
    @LoopActor func matrix() {
        let fixture = Fixture()
        let interfaces = ["org.example.Thing", "org.example.Nope", ""] + Self.standard
        let members = ["Echo", "Later", "Greedy", "Nope", ""]
            + StandardInterface.allCases.flatMap { $0.methods.map(\.name) }
        let argumentLists: [[DBusValue]] = [
            [], [.string("")], [.string("org.example.Thing")], [.string("org.freedesktop.DBus.Peer")],
            [.string("org.example.Thing"), .string("Flags")], [.string(""), .string("Flags")],
            [.string("org.example.Thing"), .string("Flags"), .variant(.uint32(1))], [.uint32(7)],
            [.string("a"), .string("b"), .string("c"), .string("d")],
        ]
        let allowed = Set(["Failed", "InvalidArgs", "UnknownMethod", "UnknownObject", "UnknownInterface",
                           "UnknownProperty", "PropertyReadOnly"].map { BusError.prefix + $0 })
        var calls = 0
        for path in [Self.root, Self.child, Self.between, Self.nowhere] {
            for interface in interfaces {
                for member in members {
                    for arguments in argumentLists {
                        calls += 1
                        switch fixture.call(path, interface, member, arguments) {
                        case .error(let name)?:
                            #expect(allowed.contains(name), "\(interface).\(member)\(arguments) at \(path): \(name)")
                        case .reply?, nil: break
                        }
                    }
                }
            }
        }
        #expect(calls == 4 * interfaces.count * members.count * argumentLists.count)
    }
}
