import Testing
@testable import ReachabilityBus
import ReachabilityCore
@testable import ReachabilityLoop
import ReachabilityPlatform
@testable import ReachabilityService
import ReachabilityTestSupport

/// `…Metrics` through the dispatcher, with no bus: who may read, and who hears `Changed`.
@Suite("Metrics: root's and adm's; Changed to followers, once per burst")
struct MetricsObjectTests {
    init() { LoopThread.start() }

    @LoopActor
    final class Fixture {
        let tree = ObjectTree(machineID: { "0123456789abcdef0123456789abcdef" }, logger: recordingLogger().logger)
        let metrics: MetricsObject
        var signals: [(String, [String]?)] = []

        init(render: (@Sendable () -> String)?) {
            metrics = MetricsObject(render: render)
            metrics.exported = tree.export(at: Names.rootPath, interfaces: [MetricsObject.interface.bound(to: metrics)])
            tree.emit = { [unowned self] _, _, name, _, destinations in self.signals.append((name, destinations)) }
        }

        func call(_ member: String, as user: UInt32, sender: String = ":1.9") -> Result<[DBusValue], BusError>? {
            tree.answer(member, at: Names.rootPath, interface: Names.metricsInterface, from: sender, as: user)
        }
    }

    @Test("root reads the exporter's text; nobody is refused; no exporter is a named error")
    @LoopActor func access() {
        let fixture = Fixture(render: { "# TYPE x gauge\nx 1\n" })
        #expect(fixture.call("Read", as: 0).flatMap { try? $0.get() } == [.string("# TYPE x gauge\nx 1\n")])
        guard case .failure(let refused)? = fixture.call("Read", as: 65534) else {
            Issue.record("nobody read the metrics")
            return
        }
        #expect(refused.name == "org.freedesktop.DBus.Error.AccessDenied" && refused.message.contains("adm"))
        guard case .failure(let none)? = Fixture(render: nil).call("Read", as: 0) else {
            Issue.record("a daemon without exporter answered")
            return
        }
        #expect(none.name == "org.freedesktop.DBus.Error.NotSupported")
    }

    @Test("Changed goes to followers only, once for several changes, and not after they leave")
    @LoopActor func followers() async {
        let fixture = Fixture(render: { "" })
        let target = WatchedTarget()
        fixture.metrics.targetAdded(target)  // nobody follows: no signal is even scheduled
        #expect(fixture.call("Follow", as: 0, sender: ":1.20") != nil)
        fixture.metrics.targetChanged(target)
        fixture.metrics.backendChanged(to: .kernel, networkManagerBack: false)
        await idle()
        #expect(fixture.signals.map(\.0) == ["Changed"])
        #expect(fixture.signals.first?.1 == [":1.20"])
        fixture.metrics.releaseAll(client: ":1.20")
        fixture.metrics.targetRemoved(target)
        await idle()
        #expect(fixture.signals.count == 1)
    }

    /// Lets the loop run its pending idle sources.
    @LoopActor private func idle() async {
        // The handle is kept until the source ran (dropping it would remove the source).
        var handle: SourceHandle?
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            handle = Sources.idle(priority: 300) { done.resume() }  // after the default-priority ones
        }
        _ = handle
    }
}
