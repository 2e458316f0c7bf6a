import InMemoryLogging
import Logging
import Testing
@testable import ReachabilityBus
@testable import ReachabilityLoop
@testable import ReachabilityService
import ReachabilityTestSupport

/// `org.freedesktop.LogControl1` through the dispatcher, with no bus: the caller's uid is set
/// by hand, as the connection sets it from the bus driver's answer. Each test has a log of its
/// own (a `SystemLog` writing nowhere, and an in-memory logger): none shares one with another.
@Suite("LogControl1 and the log's writers")
struct LogControlTests {
    init() { LoopThread.start() }

    @LoopActor
    final class Fixture {
        let log = SystemLog(program: "reachabilityd", target: .null)
        let told = recordingLogger()
        let tree: ObjectTree
        let object: LogControlObject
        init() {
            tree = ObjectTree(machineID: { "0123456789abcdef0123456789abcdef" }, logger: told.logger)
            object = LogControlObject(log: log, logger: told.logger)
            tree.export(at: Names.logControlPath, interfaces: [LogControlObject.interface.bound(to: object)])
        }

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
        let log = fixture.log
        #expect(fixture.get(as: 65534, "LogLevel") == .variant(.string("info")))
        #expect(fixture.get(as: 65534, "SyslogIdentifier") == .variant(.string("reachabilityd")))
        let refused = fixture.set(as: 65534, "LogLevel", .string("debug"))
        #expect(refused?.name == "org.freedesktop.DBus.Error.AccessDenied")
        #expect(refused?.message.contains("only root") == true)
        #expect(log.level == .info)
        #expect(fixture.set(as: 0, "LogLevel", .string("debug")) == nil)
        #expect(log.level == .debug)
        #expect(fixture.get(as: 65534, "LogLevel") == .variant(.string("debug")))
        #expect(fixture.set(as: 0, "LogLevel", .string("loud"))?.name == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(fixture.set(as: 0, "LogLevel", .uint32(7))?.name == "org.freedesktop.DBus.Error.InvalidArgs")
        #expect(fixture.set(as: 65534, "LogTarget", .string("null"))?.name == "org.freedesktop.DBus.Error.AccessDenied")
        #expect(fixture.set(as: 0, "LogTarget", .string("console")) == nil)
        #expect(log.target == .console)
        #expect(fixture.set(as: 0, "LogTarget", .string("auto")) == nil)
        #expect(log.target == SystemLog.environmentTarget)
        #expect(fixture.set(as: 0, "SyslogIdentifier", .string("x"))?.name
                == "org.freedesktop.DBus.Error.PropertyReadOnly")
        // Each change is told, at notice, naming who made it.
        let notices = fixture.told.records.entries.filter { $0.level == .notice }.map { "\($0.message)" }
        #expect(notices == ["log level set to debug by :1.7", "log target set to console by :1.7",
                            "log target set to \(SystemLog.environmentTarget.rawValue) by :1.7"])
    }

    @Test("LogControl1's level is every copy's: a logger made before the change follows it")
    func sharedLevel() {
        let log = SystemLog(program: "reachabilityd", target: .null)
        let logger = log.logger
        var copy = logger
        #expect(logger.logLevel == .info)
        log.level = .debug
        #expect(logger.logLevel == .debug && copy.logLevel == .debug)
        copy.logLevel = .warning
        #expect(log.level == .warning && logger.logLevel == .warning)
        // Finer than swift-log's levels: at `alert`, a `critical` record (priority crit) is not wanted.
        log.level = .alert
        #expect(logger.logLevel == .critical)
        #expect(!log.wants(Log.Priority(.critical)) && log.wants(.emerg))
    }

    @Test("metadata becomes journal fields: the event's MESSAGE_ID, REACH_… for the rest, in order")
    func journalFields() {
        let log = SystemLog(program: "reachabilityd", target: .null)
        var handler = SystemLogHandler(log: log)
        handler.metadata = ["client": "from the handler", "backend": "overridden"]
        let metadata = Logger.Metadata.event(.networkManagerBack, ["backend": "networkmanager", "backend.mode": "auto"])
        let event = LogEvent(level: .notice, message: "NetworkManager is back", metadata: metadata,
                             source: nil, file: #fileID, function: #function, line: #line)
        let record = handler.record(event)
        #expect(record.priority == .notice)
        #expect(record.text == "NetworkManager is back")
        #expect(record.messageID == Log.Event.networkManagerBack.id)
        #expect(record.fields.map(\.0) == ["REACH_BACKEND", "REACH_BACKEND_MODE", "REACH_CLIENT"])
        #expect(record.fields.map(\.1) == ["networkmanager", "auto", "from the handler"])
        #expect(Log.journalField("uid") == "REACH_UID")
        #expect(Log.journalField("target.name-2") == "REACH_TARGET_NAME_2")
    }

    @Test("a journal entry: KEY=value lines, and a value with a newline as its length and bytes")
    func journalEntry() {
        let entry = SystemLog.journalEntry(.warning, "reachabilityd", "two\nlines",
                                           messageID: Log.Event.clientOverLimit.id, fields: [("REACH_CLIENT", ":1.5")])
        var expected = Array("PRIORITY=4\nSYSLOG_FACILITY=3\nSYSLOG_IDENTIFIER=reachabilityd\n".utf8)
        expected += Array("MESSAGE_ID=\(Log.Event.clientOverLimit.id)\nREACH_CLIENT=:1.5\nMESSAGE\n".utf8)
        expected += [9, 0, 0, 0, 0, 0, 0, 0] + Array("two\nlines\n".utf8)
        #expect(entry == expected)
        // A long message is cut, so that the datagram always fits.
        let long = SystemLog.journalEntry(.info, "reachabilityd", String(repeating: "x", count: 100_000),
                                          messageID: nil, fields: [])
        #expect(long.count < SystemLog.maximumMessage + 200)
    }

    @Test("the MESSAGE_IDs are 128-bit ids, distinct")
    func messageIDs() {
        let ids = [Log.Event.backendSwitched, .networkManagerLost, .networkManagerBack, .clientOverLimit,
                   .internetChanged, .pathChanged].map(\.id)
        #expect(Set(ids).count == ids.count)
        for id in ids { #expect(id.count == 32 && id.allSatisfy(\.isHexDigit) && id == id.lowercased()) }
    }
}
