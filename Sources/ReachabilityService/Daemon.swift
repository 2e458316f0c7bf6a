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
        /// Targets one client may hold.
        public var maximumTargetsPerClient = 256
        /// Targets all clients together may hold.
        public var maximumTargets = 16384
        /// Seconds between re-resolutions of every host target.
        public var refreshInterval: UInt32 = 300
        /// Where device facts come from.
        public var backend: BackendMode = .auto
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
    private let manager: ManagerObject
    private let registry: TargetRegistry
    private let evaluator: Evaluator
    private let internet = TargetObject(kind: .internet, name: "")
    private var signalSources: [SourceHandle] = []
    private var exitCode: Int32 = 0
    private let backendMode: BackendMode

    public init(options: Options) throws(Exit) {
        Log.verbose = options.verbose
        backendMode = options.backend
        do {
            connection = try BusConnection(options.bus)
        } catch {
            throw .failure(error.message)
        }
        evaluator = Evaluator(refreshInterval: options.refreshInterval)
        registry = TargetRegistry(connection: connection, perClientLimit: options.maximumTargetsPerClient,
                                  globalLimit: options.maximumTargets)
        manager = ManagerObject(registry: registry, evaluator: evaluator)
        // Objects first, so that whoever sees the name appear finds them.
        let root = connection.export(at: Names.rootPath, interfaces: [
            ManagerObject.interface.bound(to: manager),
            TargetObject.interface.bound(to: internet),
        ])
        manager.exported = root
        internet.exported = root
        internet.refresher = evaluator
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
        // A client that leaves the bus releases everything it held.
        connection.watchNameOwners { [unowned self] name, _, newOwner in
            if newOwner.isEmpty && name.hasPrefix(":") { self.registry.releaseAll(client: name) }
        }
        registry.onAdded = { [unowned self] target in
            target.refresher = self.evaluator
            target.update(self.evaluator.state(of: target))
            self.evaluator.resolve(target)
            self.hostTargetsChanged()
        }
        registry.onRemoved = { [unowned self] _ in self.hostTargetsChanged() }
        evaluator.onReload = { [unowned self] facts in
            guard self.manager.backend != facts.backend else { return }
            Log.info("backend: \(facts.backend.rawValue) (mode \(self.backendMode.rawValue))")
            self.manager.backend = facts.backend
        }
        do {
            try evaluator.start(mode: backendMode) { [unowned self] in self.networkChanged() }
        } catch {
            throw .failure("cannot watch the kernel's network state: \(error)")
        }
        loop.run()
        connection.flush()
        return exitCode
    }

    private func hostTargetsChanged() {
        evaluator.hostTargetsChanged(count: registry.hostCount) { [unowned self] in
            self.registry.objects.values.filter { $0.kind == .host }
        }
    }

    /// One evaluation of every target after a burst of changes; host names are
    /// looked up again (their routes are re-evaluated at once meanwhile).
    private func networkChanged() {
        let start = MonotonicClock.microseconds()
        evaluator.reload()
        internet.update(evaluator.state(of: internet))
        evaluator.prefetchRoutes(for: registry.objects.values)
        let targets = Array(registry.objects.values)
        let states = targets.map { evaluator.state(of: $0) }
        let evaluated = MonotonicClock.microseconds()
        var changed = 0
        for (target, state) in zip(targets, states) where state != target.state {
            target.update(state)
            changed += 1
        }
        let announced = MonotonicClock.microseconds()
        Log.debug("evaluated \(targets.count + 1) targets in \(Double(evaluated - start) / 1000) ms; "
                  + "announced \(changed) changes in \(Double(announced - evaluated) / 1000) ms")
        // Announced first; then the names are looked up again.
        for target in registry.objects.values where target.kind == .host {
            evaluator.resolve(target)
        }
    }
}
