import ReachabilityBus
import ReachabilityCore
import ReachabilityPlatform

/// Turns network facts into target states: reads the facts once per burst of
/// changes, looks routes up per address (cached until the next change), and
/// resolves host names — on every network change, on `Refresh`, and on a
/// refresh timer that exists only while host targets exist.
final class Evaluator: TargetRefreshing {
    private var observer: NetworkObserver!
    let resolver = Resolver()
    private(set) var facts: NetworkFacts = .unknown
    /// Kernel routes by address, valid until the next network change.
    private var routes: [IPAddress: RouteFact?] = [:]
    private var refreshTimer: SourceHandle?
    private let refreshInterval: UInt32
    /// Unwatched-host `Query` lookups in flight, by caller.
    private var queries: [String: Int] = [:]
    static let maximumQueriesPerClient = 64
    static let maximumQueries = 1024

    init(refreshInterval: UInt32) {
        self.refreshInterval = refreshInterval
    }

    func start(mode: BackendMode, onChange: @escaping () -> Void) throws(NetlinkError) {
        observer = try NetworkObserver(mode: mode, onChange: onChange)
    }

    /// Called after every reload with the new facts (the daemon shows their backend).
    var onReload: ((NetworkFacts) -> Void)?

    /// Re-reads the facts after a change, and forgets the route answers the
    /// kernel's events made stale. `Refresh` (`everything`) forgets them all.
    func reload(everything: Bool = false) {
        facts = observer?.facts() ?? .unknown
        let stale = observer?.takeRouteInvalidation() ?? RouteInvalidation(all: true)
        if everything || stale.all {
            routes.removeAll(keepingCapacity: true)
        } else if !stale.links.isEmpty {
            routes = routes.filter { _, route in !(route.map { stale.links.contains($0.interfaceIndex) } ?? false) }
        }
        onReload?(facts)
    }

    private func route(_ address: IPAddress) -> RouteFact? {
        if let cached = routes[address] { return cached }
        let route = observer?.routes(to: [address]).first ?? nil
        routes[address] = route
        return route
    }

    /// Looks the routes of every address of `targets` up in batches, ahead of evaluating them.
    func prefetchRoutes<S: Sequence>(for targets: S) where S.Element == TargetObject {
        var wanted: [IPAddress] = []
        var seen = Set<IPAddress>()
        for target in targets {
            let addresses: [IPAddress] =
                switch (target.kind, target.resolution) {
                case (.address, _): target.address.map { [$0] } ?? []
                case (.host, .resolved(let list)): list
                default: []
                }
            for address in addresses where routes[address] == nil && seen.insert(address).inserted {
                wanted.append(address)
            }
        }
        guard let observer, !wanted.isEmpty else { return }
        for (address, route) in zip(wanted, observer.routes(to: wanted)) { routes[address] = route }
    }

    private func addressRoute(_ address: IPAddress) -> Engine.AddressRoute {
        Engine.AddressRoute(address: address.description, family: address.family, route: route(address))
    }

    /// The state of `target` from the current facts (and, for a host, its last resolution).
    func state(of target: TargetObject) -> TargetState {
        switch target.kind {
        case .internet:
            return Engine.evaluateInternet(facts)
        case .address:
            return Engine.evaluateAddresses([addressRoute(target.address!)], facts: facts)
        case .host:
            return state(of: target.resolution)
        }
    }

    private func state(of resolution: TargetObject.Resolution) -> TargetState {
        switch resolution {
        case .pending:
            return .unknown
        case .failed(let message):
            return Engine.resolutionFailed(message, facts: facts)
        case .resolved(let addresses):
            return Engine.evaluateAddresses(addresses.map(addressRoute), facts: facts)
        }
    }

    // MARK: Host resolution

    /// The resolver's text addresses as literals (it only returns valid ones).
    static func parse(_ addresses: [String]) -> [IPAddress] {
        addresses.compactMap { try? IPAddress(parsing: $0) }
    }

    /// Looks `target`'s name up (again); a lookup in flight is followed by one more.
    func resolve(_ target: TargetObject) {
        guard target.kind == .host else { return }
        if target.lookup != nil {
            target.lookupAgain = true
            return
        }
        target.lookup = resolver.lookup(target.name) { [unowned self, unowned target] result in
            target.lookup = nil
            switch result {
            case .success(let addresses): target.resolution = .resolved(Self.parse(addresses))
            case .failure(let error): target.resolution = .failed(error.message)
            }
            target.update(self.state(of: target))
            if target.lookupAgain {
                // Refresh calls that came during this lookup wait for the next one.
                target.lookupAgain = false
                self.resolve(target)
                return
            }
            let waiting = target.waitingCalls
            target.waitingCalls = []
            for call in waiting { call.reply(target.refreshReply) }
        }
    }

    /// `Refresh`: re-read everything; a host answers once its new lookup is done.
    func refresh(_ target: TargetObject, call: MethodCall) -> [DBusValue]? {
        reload(everything: true)
        target.update(state(of: target))
        guard target.kind == .host else { return target.refreshReply }
        target.waitingCalls.append(call)
        resolve(target)
        return nil
    }

    /// Keeps the periodic re-resolution running exactly while host targets exist.
    func hostTargetsChanged(count: Int, all: @escaping () -> [TargetObject]) {
        if count == 0 {
            refreshTimer = nil
        } else if refreshTimer == nil {
            refreshTimer = Sources.every(seconds: refreshInterval) { [unowned self] in
                for target in all() { self.resolve(target) }
                return true
            }
        }
    }

    // MARK: Query

    /// One-shot evaluation of `input` for `client`, without creating an object.
    func query(_ input: TargetInput?, watched: TargetObject?, call: MethodCall) throws(BusError) -> [DBusValue]? {
        func reply(_ state: TargetState) -> [DBusValue] {
            [.uint32(state.exportedFlags.rawValue), .int32(state.status.rawValue), state.details]
        }
        guard let input else { return reply(Engine.evaluateInternet(facts)) }
        if let watched, watched.state.flags != nil { return reply(watched.state) }
        switch input {
        case .address(let address):
            return reply(Engine.evaluateAddresses([addressRoute(address)], facts: facts))
        case .host(let name):
            let client = call.sender
            guard queries[client, default: 0] < Self.maximumQueriesPerClient,
                queries.values.reduce(0, +) < Self.maximumQueries
            else {
                throw BusError.limitsExceeded(
                    "too many host queries in flight (at most \(Self.maximumQueriesPerClient) per client, "
                        + "\(Self.maximumQueries) in all); watch the host instead, or wait for the answers")
            }
            queries[client, default: 0] += 1
            resolver.lookup(name) { [unowned self] result in
                self.queries[client, default: 1] -= 1
                if self.queries[client] == 0 { self.queries[client] = nil }
                let resolution: TargetObject.Resolution =
                    switch result {
                    case .success(let addresses): .resolved(Self.parse(addresses))
                    case .failure(let error): .failed(error.message)
                    }
                call.reply(reply(self.state(of: resolution)))
            }
            return nil
        }
    }
}
