import Testing
@testable import ReachabilityBus
@testable import ReachabilityLoop
@testable import ReachabilityService

/// `org.freedesktop.LogControl1` through the dispatcher, with no bus: the caller's uid is set
/// by hand, as the connection sets it from the bus driver's answer.
@Suite("LogControl1 and the log's writers", .serialized)
struct LogControlTests {
    init() { LoopThread.start() }

    @LoopActor
    final class Fixture {
        let tree = ObjectTree(machineID: { "0123456789abcdef0123456789abcdef" })
        let object = LogControlObject()
        init() { tree.export(at: Names.logControlPath, interfaces: [LogControlObject.interface.bound(to: object)]) }

        func call(as user: UInt32, _ member: String, _ arguments: [DBusValue]) -> Result<[DBusValue], BusError>? {
            tree.answer(member, at: Names.logControlPath, interface: "org.freedesktop.DBus.Properties", arguments,
                        from: ":1.7", as: user)
        }

        func set(as user: UInt32, _ name: String, _ value: DBusValue) -> BusError? {
            if case .failure(let error) = call(as: user, "Set", [.string(Names.logControlInterface), .string(name),
                                                                 .variant(value)]) { return error }
            return nil
        }

        func get(as user: UInt32, _ name: String) -> DBusValue? {
            guard case .success(let values) = call(as: user, "Get", [.string(Names.logControlInterface), .string(name)])
            else { return nil }
            return values.first
        }
    }

    @Test("everyone reads; only root sets, and only a level or target the service knows")
    @LoopActor func rootSets() {
        let fixture = Fixture()
        defer {
            Log.level = .info
            Log.setTarget(nil)
        }
        #expect(fixture.get(as: 65534, "LogLevel") == .variant(.string("info")))
        #expect(fixture.get(as: 65534, "SyslogIdentifier") == .variant(.string("reachabilityd")))
        let refused = fixture.set(as: 65534, "LogLevel", .string("debug"))
        #expect(refused?.name == "org.freedesktop.DBus.Error.AccessDenied")
        #expect(refused?.message.contains("only root") == true)
        #expect(Log.level == .info)
        #expect(fixture.set(as: 0, "LogLevel", .string("debug")) == nil)
        #expect(Log.level == .debug)
        #expect(fixture.get(as: 65534, "LogLevel") == .variant(.string("debug")))
        #expect(fixture.set(as: 0, "LogLevel", .string("loud"))?.name == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(fixture.set(as: 0, "LogLevel", .uint32(7))?.name == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(fixture.set(as: 65534, "LogTarget", .string("null"))?.name == "org.freedesktop.DBus.Error.AccessDenied")
        #expect(fixture.set(as: 0, "LogTarget", .string("null")) == nil)
        #expect(Log.target == .null)
        #expect(fixture.set(as: 0, "LogTarget", .string("auto")) == nil)
        #expect(Log.target == Log.environmentTarget)
        #expect(fixture.set(as: 0, "SyslogIdentifier", .string("x"))?.name
                == "org.freedesktop.DBus.Error.PropertyReadOnly")
    }

    @Test("a journal entry: KEY=value lines, and a value with a newline as its length and bytes")
    func journalEntry() {
        let entry = Log.journalEntry(.warning, "reachabilityd", "two\nlines", .clientOverLimit,
                                     ["REACH_CLIENT": ":1.5"])
        var expected = Array("PRIORITY=4\nSYSLOG_FACILITY=3\nSYSLOG_IDENTIFIER=reachabilityd\n".utf8)
        expected += Array("MESSAGE_ID=\(Log.Event.clientOverLimit.id)\nREACH_CLIENT=:1.5\nMESSAGE\n".utf8)
        expected += [9, 0, 0, 0, 0, 0, 0, 0] + Array("two\nlines\n".utf8)
        #expect(entry == expected)
        // A long message is cut, so that the datagram always fits.
        let long = Log.journalEntry(.info, "reachabilityd", String(repeating: "x", count: 100_000), nil, [:])
        #expect(long.count < Log.maximumMessage + 200)
    }

    @Test("the MESSAGE_IDs are 128-bit ids, distinct")
    func messageIDs() {
        let ids = [Log.Event.backendSwitched, .networkManagerLost, .networkManagerBack, .clientOverLimit].map(\.id)
        #expect(Set(ids).count == ids.count)
        for id in ids { #expect(id.count == 32 && id.allSatisfy(\.isHexDigit) && id == id.lowercased()) }
    }
}
