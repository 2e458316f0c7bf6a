import Glibc
import Logging
import ReachabilityBus
import ReachabilityCore
import ReachabilityFairness
import ReachabilityLoop
import ReachabilityPlatform

/// The daemon: set up, evaluate, take the bus name and announce the internet's state, loop.
@LoopActor
public final class Daemon {
    public struct Options: Sendable {
        public var bus: BusConnection.Address = .system
        public var replace = false
        public var verbose = false
        /// Targets one client may hold.
        public var maximumTargetsPerClient = 256
        /// Targets the clients of one user may hold together.
        public var maximumTargetsPerUser = 2048
        /// Targets all clients together may hold.
        public var maximumTargets = 16384
        /// Seconds between re-resolutions of every host target.
        public var refreshInterval: UInt32 = 300
        /// Where device facts come from.
        public var backend: BackendMode = .auto
        /// The metrics as text (the exporter `main` bootstrapped swift-metrics with);
        /// `nil`: `Metrics.Read` says there is none.
        public var metricsText: (@Sendable () -> String)?
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

    private let loop: MainLoop
    private let connection: BusConnection
    private let manager: ManagerObject
    private let registry: TargetRegistry
    private let paths: PathRegistry
    private let requests: EvaluationRequests
    private let internet: TargetObject
    /// The targets wired to the evaluator (its sink).
    private let wiring: TargetWiring
    private let logControl: LogControlObject
    private let logger: Logger
    private let metrics: MetricsObject
    private var signalSources: [SourceHandle] = []
    /// systemd's notification socket and watchdog (`WatchdogSec=` in the unit).
    private let serviceManager = ServiceManager()
    private var exitCode: Int32 = 0
    private let backendMode: BackendMode
    private let replace: Bool
    /// When set-up began (monotonic µs): the time to the name is logged.
    private let started = MonotonicClock.microseconds()
    /// Whether the bus name is requested (the first evaluation is done, or the bound passed).
    private var isServing = false
    /// Ends the wait for the first evaluation (`readyBound`).
    private var readyTimer: SourceHandle?

    /// The longest the name waits for the first evaluation: a backend that never answers
    /// (NetworkManager on the bus but hung: libnm's client waits for its replies) must not
    /// keep the service away. Well below the bus's activation
    /// timeout (25 s) and a caller's default call timeout (25 s); far above what
    /// NetworkManager takes to answer on a loaded boot (tens of milliseconds). Past it,
    /// the name is requested with the facts known then (the kernel's in `auto` mode,
    /// nothing in `networkmanager` mode), and the backend's answer follows as a change.
    public static let readyBound = ServiceLimits.standard.readyBound

    /// Sets up on `loop`, which the calling thread runs. Everything logs to `logger`;
    /// `LogControl1` sets the level and target of `log` (the one `logger` writes to).
    public init(options: Options, loop: MainLoop, logger: Logger, log: SystemLog) throws(Exit) {
        self.loop = loop
        self.logger = logger
        logControl = LogControlObject(log: log, logger: logger)
        backendMode = options.backend
        replace = options.replace
        do {
            connection = try BusConnection(options.bus, logger: logger)
        } catch {
            throw .failure(error.message)
        }
        requests = EvaluationRequests(refreshInterval: options.refreshInterval, logger: logger)
        internet = TargetObject(WatchedTarget(), requests: requests)
        registry = TargetRegistry(connection: connection, requests: requests,
                                  perClientLimit: options.maximumTargetsPerClient,
                                  perUserLimit: options.maximumTargetsPerUser, globalLimit: options.maximumTargets,
                                  logger: logger)
        paths = PathRegistry(connection: connection, evaluator: requests.evaluator)
        manager = ManagerObject(registry: registry, paths: paths, requests: requests)
        metrics = MetricsObject(render: options.metricsText)
        wiring = TargetWiring(internet: internet, registry: registry, evaluator: requests.evaluator, metrics: metrics,
                              logger: logger)
        // Objects first, so that whoever sees the name appear finds them.
        let root = connection.export(at: Names.rootPath, interfaces: [
            ManagerObject.interface.bound(to: manager),
            TargetObject.interface.bound(to: internet),
            MetricsObject.interface.bound(to: metrics),
        ])
        // Quiet until the name is ours: nobody listens by it yet, and `serve` says everything then.
        root.isQuiet = true
        manager.exported = root
        metrics.exported = root
        internet.exported = root
        connection.addObjectManager(at: Names.rootPath)
        connection.export(at: Names.logControlPath, interfaces: [LogControlObject.interface.bound(to: logControl)])
        // Before the name is ours: whoever sees it may stop us at once, and must get a clean exit.
        for signal in [SIGTERM, SIGINT] {
            signalSources.append(Sources.onSignal(signal) { [unowned self] in
                self.logger.info("received signal \(signal); exiting")
                self.loop.quit()
            })
        }
        // SIGHUP, as services take it: reload. There is no configuration file to re-read (the
        // command line is the configuration), so everything is evaluated again from scratch.
        signalSources.append(Sources.onSignal(SIGHUP) { [unowned self] in
            self.reload()
        })
    }

    /// `SIGHUP`: every fact read again, every cached route forgotten, every host looked up again.
    private func reload() {
        let evaluator = requests.evaluator
        guard evaluator.hasFacts else {
            return logger.info("received SIGHUP before the first evaluation; it is under way")
        }
        logger.info("""
            received SIGHUP; evaluating everything again and looking every host up again \
            (the command line is the configuration: nothing else to re-read)
            """)
        evaluator.reevaluateEverything()
    }

    /// Requests the bus name: the first evaluation is done (or `readyBound` passed), every
    /// object is exported, and whoever the bus queued a call for gets the real state.
    private func serve(waitedTooLong: Bool) {
        guard !isServing else { return }
        isServing = true
        readyTimer?.cancel()
        readyTimer = nil
        if waitedTooLong {
            // Evaluated from what answered (the kernel, in `auto` mode), so the first caller gets that.
            requests.evaluator.networkChanged()
            logger.warning("""
                the backend gave no first answer within \(Self.readyBound / 1000) ms; serving with what is \
                known (backend \(manager.backend.rawValue)), its answer follows as a change
                """)
        }
        do {
            try connection.requestName(Names.busName, replace: replace)
        } catch {
            logger.error("\(error.message)")
            exitCode = 1
            return loop.quit()
        }
        let elapsed = Double(MonotonicClock.microseconds() - started) / 1000
        logger.info("""
            serving \(Names.busName) as \(connection.uniqueName), version \(Names.version) \
            (backend \(manager.backend.rawValue), ready in \(elapsed) ms)
            """)
        // A restarted or upgraded service announces itself: whoever listens by the well-known
        // name (an applet that read the state once, from the instance before) hears this
        // instance's internet target, every property and its StatusChanged, without asking.
        internet.exported?.isQuiet = false
        internet.exported?.announceEverything(of: Names.targetInterface)
        // What start-up alone needed (the backend's first reading, the introspection data) is
        // freed by now: given back once, so that the idle daemon is its working set.
        Memory.trimSoon()
    }

    /// Runs until SIGTERM/SIGINT, the loss of the name or of the bus. Returns the exit status.
    public func run() throws(Exit) -> Int32 {
        connection.onNameLost = { [unowned self] name in
            self.logger.info("lost \(name) (replaced by another instance); exiting")
            self.loop.quit()
        }
        connection.onDisconnected = { [unowned self] in
            self.logger.error("disconnected from the bus; exiting")
            self.exitCode = 1
            self.loop.quit()
        }
        // A client that leaves the bus releases everything it held.
        connection.watchNameOwners { [unowned self] name, _, newOwner in
            guard newOwner.isEmpty && name.hasPrefix(":") else { return }
            self.registry.releaseAll(client: name)
            self.paths.releaseAll(client: name)
            self.requests.releaseAll(client: name)
            self.metrics.releaseAll(client: name)
        }
        let evaluator = requests.evaluator
        metrics.targetAdded(internet.target)
        metrics.counts = { [unowned self] in
            // Counted by kind when the metrics are read (an address pair is no address).
            var targets: [TargetKind: Int] = [.internet: 1]
            for key in self.registry.objects.keys { targets[key.kind, default: 0] += 1 }
            let clients = Set(self.registry.clients).union(self.paths.clients).count
            return (targets, clients)
        }
        wiring.daemon = self
        evaluator.sink = wiring
        do {
            // A source it cannot read is the administrator's business: a warning.
            let limits = ServiceLimits.standard
            try evaluator.start(mode: backendMode, failureLevel: .warning,
                                upstream: (limits.unansweredDestinations, limits.unansweredWindow, limits.upstreamCheckInterval))
        } catch {
            throw .failure("cannot watch the kernel's network state: \(error)")
        }
        // The name follows the first evaluation (`evaluationFinished`), within a bound.
        readyTimer = Sources.after(milliseconds: UInt32(Self.readyBound / 1000)) { [unowned self] in
            self.serve(waitedTooLong: true)
        }
        // systemd's watchdog, fed from this loop: a loop that stops turning (not only a process
        // that dies) is ended and restarted, and its name leaves the bus, so that every client
        // stops repeating its last answer (docs/design.md, "When the service is away").
        if let period = serviceManager.feedWatchdog() {
            let timeout = Double(serviceManager.watchdogMicroseconds ?? 0) / 1_000_000
            logger.info("feeding systemd's watchdog every \(period) s (its timeout: \(timeout) s)")
        }
        loop.run()
        connection.flush()
        return exitCode
    }
}

/// What evaluations tell the daemon beyond the targets (`TargetWiring` tells the targets):
/// the Manager shows the backend, the path object takes the new paths, the first
/// evaluation takes the name.
extension Daemon: EvaluationEvents {
    /// The first evaluation from every source's first answer is the one to be ready with.
    public func evaluationFinished() {
        if !isServing && requests.evaluator.everySourceAnswered { serve(waitedTooLong: false) }
    }

    public func factsReloaded(_ facts: NetworkFacts) {
        let old = manager.backend
        guard old != facts.backend else { return }
        if old == .networkManager {
            logger.warning("NetworkManager left the bus; the kernel's facts are used meanwhile",
                           metadata: .event(.networkManagerLost, ["backend": "\(facts.backend.rawValue)"]))
        } else if facts.backend == .networkManager && old != .none {
            logger.notice("NetworkManager is back on the bus; its facts are used again",
                          metadata: .event(.networkManagerBack, ["backend": "\(facts.backend.rawValue)"]))
        }
        logger.info("backend: \(facts.backend.rawValue) (mode \(backendMode.rawValue))", metadata: .event(
            .backendSwitched, ["backend": "\(facts.backend.rawValue)", "backend.mode": "\(backendMode.rawValue)"]))
        metrics.backendChanged(to: facts.backend,
                               networkManagerBack: facts.backend == .networkManager && old != .none)
        manager.backend = facts.backend
    }

    public func invalidated(_ reason: InvalidationReason) {
        logger.info("path invalidated: \(reason.rawValue)")
        paths.object?.invalidated(reason)
    }

    public func pathChanged(_ state: PathState) {
        let old = paths.object?.state ?? .none
        if state.summary != old.summary {
            logger.notice("path: \(state.summary)",
                          metadata: .event(.pathChanged, ["reason": "\(state.reason?.rawValue ?? "")"]))
        }
        paths.object?.update(state)
        // Told after every evaluation under uid rules (the holders' own paths): the metrics, and
        // their followers' Changed, only when the paths themselves changed.
        if state != old { metrics.pathChanged(state) }
    }
}
