@testable import ReachabilityBus
import ReachabilityTestSupport
import ReachabilityCore
import ReachabilityLoop
import ReachabilityPlatform
@testable import ReachabilityService

/// The registries export into an object tree with no bus behind it.
extension ObjectTree: ObjectExporter {
    public func announceAdded(_ path: ObjectPath, to listeners: [String]) {
        announceAdded(path, to: Optional(listeners))
    }
    public func announceRemoved(_ path: ObjectPath, to listeners: [String]) {
        announceRemoved(path, to: Optional(listeners))
    }
    public func compactObjects() { compact() }
}

/// The network a daemon test evaluates: links, and the kernel's route per address.
@LoopActor
final class FakeNetwork: NetworkFactSource {
    var links: [Int32: LinkFact]
    var answers: [IPAddress: RouteFact] = [:]
    /// What the next evaluation forgets (the live monitor's classification of its events).
    var pending = RouteInvalidation(all: true)

    init(links: [LinkFact]) { self.links = Dictionary(uniqueKeysWithValues: links.map { ($0.index, $0) }) }

    func takeRouteInvalidation() -> RouteInvalidation {
        defer { pending = RouteInvalidation() }
        return pending
    }
    func facts() -> NetworkFacts { NetworkFacts(backend: .kernel, links: links) }
    func routes(to addresses: [IPAddress]) -> [RouteFact?] { addresses.map { answers[$0] } }
    func routes(bound queries: [(address: IPAddress, interface: Int32)]) -> [RouteFact?] { queries.map { _ in nil } }
    func routes(pairs: [(local: IPAddress, remote: IPAddress)]) -> [RouteFact?] { pairs.map { answers[$0.remote] } }
    func link(holding address: IPAddress) -> Int32? { nil }
    func routedLinks() -> (viaGateway: Set<Int32>, onLink: Set<Int32>) { ([], []) }
    func dnsConfigured() -> Bool { true }
    func follow(gateways: Set<String>) {}

    /// Answers `address` with `route` (`nil`: no route), and lets the next evaluation ask again.
    func route(_ address: String, _ route: RouteFact?) {
        answers[try! IPAddress(parsing: address)] = route
        pending = RouteInvalidation(all: true)
    }
}

let fixtureLink = LinkFact(index: 2, name: "kveth0", isUp: true, hasCarrier: true, operState: .up,
                           kernelType: .ethernet, isTunnel: false)
let viaFixtureLink = RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 2, gateway: "192.0.2.1", metric: 100)

/// The daemon's objects as `Daemon` wires them — the Manager and the internet on the root,
/// the registries, the evaluator and its sink (`TargetWiring`) — on an object tree instead
/// of a bus, a recorded network, and lookups the test answers (`resolver`).
@LoopActor
final class DaemonFixture {
    struct Emitted {
        let path: ObjectPath
        let name: String
        let values: [DBusValue]
        let destinations: [String]?
    }

    let tree = ObjectTree(machineID: { "0123456789abcdef0123456789abcdef" }, logger: recordingLogger().logger)
    /// The log the registry, the wiring and the evaluator are given, and what it kept.
    let log = recordingLogger()
    let network = FakeNetwork(links: [fixtureLink])
    let resolver = ScriptedResolver()
    let requests: EvaluationRequests
    let internet: TargetObject
    let registry: TargetRegistry
    let paths: PathRegistry
    let manager: ManagerObject
    let metrics = MetricsObject(render: nil)
    let wiring: TargetWiring
    /// Every signal the tree sent, in order.
    var signals: [Emitted] = []

    var evaluator: TargetEvaluator { requests.evaluator }

    /// Evaluated once: the internet through kveth0, 198.51.100.80 too.
    init(perClientLimit: Int = 256, perUserLimit: Int = 2048, globalLimit: Int = 16384) {
        requests = EvaluationRequests(refreshInterval: 300, logger: log.logger, resolver: resolver)
        internet = TargetObject(WatchedTarget(), requests: requests)
        registry = TargetRegistry(connection: tree, requests: requests, perClientLimit: perClientLimit,
                                  perUserLimit: perUserLimit, globalLimit: globalLimit, logger: log.logger)
        paths = PathRegistry(connection: tree, evaluator: requests.evaluator)
        manager = ManagerObject(registry: registry, paths: paths, requests: requests)
        wiring = TargetWiring(internet: internet, registry: registry, evaluator: requests.evaluator, metrics: metrics,
                              logger: log.logger)
        let root = tree.export(at: Names.rootPath, interfaces: [
            ManagerObject.interface.bound(to: manager), TargetObject.interface.bound(to: internet),
        ])
        manager.exported = root
        internet.exported = root
        tree.addObjectManager(at: Names.rootPath)
        tree.emit = { [unowned self] path, _, name, values, destinations in
            self.signals.append(Emitted(path: path, name: name, values: values, destinations: destinations))
        }
        for address in ["8.8.8.8", "1.1.1.1", "9.9.9.9", "198.51.100.80"] { network.route(address, viaFixtureLink) }
        evaluator.sink = wiring
        evaluator.start(source: network)
        evaluator.networkChanged()
    }

    /// Calls `member` as `sender` of `user`; the answers, now or later, land in the recorder.
    @discardableResult
    func call(_ member: String, at path: ObjectPath = Names.rootPath, interface: String = Names.managerInterface,
              _ arguments: [DBusValue] = [], from sender: String = ":1.10", as user: UserID = 1000) -> Answers {
        let answers = Answers()
        let call = MethodCall(responder: answers, sender: sender, path: path, interface: interface,
                              member: member, arguments: arguments, logger: tree.logger)
        call.user = user
        Dispatcher.dispatch(call, in: tree)
        return answers
    }

    /// `WatchHost(text)`'s path, or `nil` if refused.
    func watch(_ text: String, from sender: String = ":1.10", as user: UserID = 1000) -> ObjectPath? {
        guard case .success(let values)? = call("WatchHost", [.string(text)], from: sender, as: user).first,
            case .objectPath(let path)? = values.first
        else { return nil }
        return path
    }

    /// A target property as `Get` answers it (to root, who sees every object).
    func property(_ name: String, at path: ObjectPath) -> DBusValue? {
        guard case .success(let values)? = call("Get", at: path, interface: "org.freedesktop.DBus.Properties",
                                                [.string(Names.targetInterface), .string(name)], as: 0).first,
            case .variant(let value)? = values.first
        else { return nil }
        return value
    }

    /// The signals sent about `path` (the ObjectManager's, about the object at `path`, included).
    func signals(about path: ObjectPath) -> [Emitted] {
        signals.filter { $0.path == path || $0.values.first == .objectPath(path) }
    }

    /// A target property as an `InterfacesAdded` carried it.
    static func added(_ name: String, in signal: Emitted) -> DBusValue? {
        guard signal.name == "InterfacesAdded", signal.values.count == 2,
            case .dictionary(_, _, let interfaces) = signal.values[1],
            case .dictionary(_, _, let properties)? = interfaces.first(where: {
                $0.key == .string(Names.targetInterface)
            })?.value,
            case .variant(let value)? = properties.first(where: { $0.key == .string(name) })?.value
        else { return nil }
        return value
    }

    /// Lets the loop run the idle sources pending now (and those they add, at the default priority).
    func idle() async {
        var handle: SourceHandle?
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            handle = Sources.idle(priority: 300) { done.resume() }
        }
        _ = handle
    }
}

/// What the dispatcher answered one call, now or later.
@LoopActor
final class Answers: CallResponder {
    private(set) var all: [Result<[DBusValue], BusError>] = []
    var first: Result<[DBusValue], BusError>? { all.first }
    func send(reply values: [DBusValue], to call: MethodCall) { all.append(.success(values)) }
    func send(error: BusError, to call: MethodCall) { all.append(.failure(error)) }
}
