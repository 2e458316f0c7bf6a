import CNetworkManager
import ReachabilityBus
import ReachabilityCore
import ReachabilityPlatform

/// The daemon: set up, announce, loop.
public final class Daemon {
    public struct Options: Sendable {
        public var bus: BusConnection.Address = .system
        public var replace = false
        public var verbose = false
        public init() {}
    }

    public enum Exit: Error, CustomStringConvertible {
        case failure(String)
        public var description: String {
            switch self {
            case .failure(let message): message
            }
        }
    }

    private let loop = MainLoop()
    private let connection: BusConnection
    private let manager = ManagerObject()
    private let internet = TargetObject(kind: .internet, name: "")
    private var observer: NetworkObserver?
    private var signalSources: [SourceHandle] = []
    private var exitCode: Int32 = 0

    public init(options: Options) throws(Exit) {
        Log.verbose = options.verbose
        do {
            connection = try BusConnection(options.bus)
        } catch {
            throw .failure(error.message)
        }
        // Objects first, so that whoever sees the name appear finds them.
        let root = connection.export(at: Names.rootPath, interfaces: [
            ManagerObject.interface.bound(to: manager),
            TargetObject.interface.bound(to: internet),
        ])
        manager.exported = root
        internet.exported = root
        connection.addObjectManager(at: Names.rootPath)
        do {
            try connection.requestName(Names.busName, replace: options.replace)
        } catch {
            throw .failure(error.message)
        }
        Log.info("serving \(Names.busName) as \(connection.uniqueName), version \(Names.version)")
    }

    /// Runs until SIGTERM/SIGINT, the loss of the name or of the bus. Returns the exit status.
    public func run() throws(Exit) -> Int32 {
        connection.onNameLost = { [unowned self] name in
            Log.info("lost \(name) (replaced by another instance); exiting")
            self.loop.quit()
        }
        connection.onDisconnected = { [unowned self] in
            Log.error("disconnected from the bus; exiting")
            self.exitCode = 1
            self.loop.quit()
        }
        for signal in [SIGTERM, SIGINT] {
            signalSources.append(Sources.onSignal(signal) { [unowned self] in
                Log.info("received signal \(signal); exiting")
                self.loop.quit()
            })
        }
        do {
            observer = try NetworkObserver { [unowned self] in self.evaluate() }
        } catch {
            throw .failure("cannot watch the kernel's network state: \(error)")
        }
        internet.refresh = { [unowned self] in self.currentInternetState() }
        loop.run()
        connection.flush()
        return exitCode
    }

    private func currentInternetState() -> TargetState {
        let facts = observer?.facts() ?? .unknown
        manager.backend = facts.backend
        return Engine.evaluateInternet(facts)
    }

    /// One evaluation of every target after a burst of changes.
    private func evaluate() {
        internet.update(currentInternetState())
    }
}
