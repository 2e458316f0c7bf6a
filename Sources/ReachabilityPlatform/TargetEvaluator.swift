import CNetworkManager
import ReachabilityBus
import ReachabilityCore

/// Turns network facts into target states, for the daemon and for the client
/// library's in-process mode alike: reads the facts once per burst of changes,
/// looks routes up per address (kept until a kernel event can have changed
/// them), and resolves host names — on every network change, on demand, and
/// on a refresh timer that exists only while host targets exist.
public final class TargetEvaluator {
    private var observer: NetworkObserver?
    public let resolver = Resolver()
    public private(set) var facts: NetworkFacts = .unknown
    /// Whether the facts have been read at least once (a first answer exists).
    public private(set) var hasFacts = false
    /// Kernel routes by address.
    private var routes: [IPAddress: RouteFact?] = [:]
    private var refreshTimer: SourceHandle?
    private let refreshInterval: UInt32

    /// Every target to evaluate after a change.
    public var targets: () -> [WatchedTarget] = { [] }
    /// Called after every reload with the new facts (the daemon shows their backend).
    public var onReload: ((NetworkFacts) -> Void)?
    /// Called after every target was evaluated following a change.
    public var onEvaluated: (() -> Void)?

    public init(refreshInterval: UInt32) {
        self.refreshInterval = refreshInterval
    }

    /// Starts watching the network; the first evaluation follows on the loop.
    public func start(mode: BackendMode) throws(NetlinkError) {
        observer = try NetworkObserver(mode: mode) { [unowned self] in self.networkChanged() }
    }

    /// Re-reads the facts after a change, and forgets the route answers the
    /// kernel's events made stale. `everything` (a refresh) forgets them all.
    public func reload(everything: Bool = false) {
        facts = observer?.facts() ?? .unknown
        let stale = observer?.takeRouteInvalidation() ?? RouteInvalidation(all: true)
        if everything || stale.all {
            routes.removeAll(keepingCapacity: true)
        } else if !stale.links.isEmpty {
            routes = routes.filter { _, route in !(route.map { stale.links.contains($0.interfaceIndex) } ?? false) }
        }
        onReload?(facts)
    }

    /// One evaluation of every target after a burst of changes; host names are
    /// looked up again (their routes are re-evaluated at once meanwhile).
    func networkChanged() {
        let start = MonotonicClock.microseconds()
        reload()
        hasFacts = true
        let targets = self.targets()
        prefetchRoutes(for: targets)
        let states = targets.map { state(of: $0) }
        let evaluated = MonotonicClock.microseconds()
        var changed = 0
        for (target, state) in zip(targets, states) where state != target.state {
            target.update(state)
            changed += 1
        }
        let announced = MonotonicClock.microseconds()
        Log.debug("evaluated \(targets.count) targets in \(Double(evaluated - start) / 1000) ms; "
                  + "announced \(changed) changes in \(Double(announced - evaluated) / 1000) ms")
        // Announced first; then the names are looked up again.
        for target in targets where target.kind == .host { resolve(target) }
        onEvaluated?()
    }

    private func route(_ address: IPAddress) -> RouteFact? {
        if let cached = routes[address] { return cached }
        let route = observer?.routes(to: [address]).first ?? nil
        routes[address] = route
        return route
    }

    /// Looks the routes of every address of `targets` up in batches, ahead of evaluating them.
    func prefetchRoutes(for targets: [WatchedTarget]) {
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
    public func state(of target: WatchedTarget) -> TargetState {
        switch target.kind {
        case .internet:
            return Engine.evaluateInternet(facts)
        case .address:
            return Engine.evaluateAddresses([addressRoute(target.address!)], facts: facts)
        case .host:
            return state(of: target.resolution)
        }
    }

    /// The state of a host with this resolution.
    public func state(of resolution: WatchedTarget.Resolution) -> TargetState {
        switch resolution {
        case .pending:
            return .unknown
        case .failed(let message):
            return Engine.resolutionFailed(message, facts: facts)
        case .resolved(let addresses):
            return Engine.evaluateAddresses(addresses.map(addressRoute), facts: facts)
        }
    }

    /// The internet's state now.
    public var internetState: TargetState { Engine.evaluateInternet(facts) }

    /// The state of an address now.
    public func state(of address: IPAddress) -> TargetState {
        Engine.evaluateAddresses([addressRoute(address)], facts: facts)
    }

    // MARK: Host resolution

    /// The resolver's result as a resolution (it only returns valid literals).
    static func resolution(_ result: Result<[String], Resolver.ResolveError>) -> WatchedTarget.Resolution {
        switch result {
        case .success(let addresses): .resolved(addresses.compactMap { try? IPAddress(parsing: $0) })
        case .failure(let error): .failed(error.message)
        }
    }

    /// Looks `target`'s name up (again); a lookup in flight is followed by one more.
    public func resolve(_ target: WatchedTarget) {
        guard target.kind == .host else { return }
        if target.lookup != nil {
            target.lookupAgain = true
            return
        }
        target.lookup = resolver.lookup(target.name) { [unowned self, unowned target] result in
            target.lookup = nil
            target.resolution = Self.resolution(result)
            target.update(self.state(of: target))
            if target.lookupAgain {
                // Whoever waits for a fresh answer waits for the next lookup.
                target.lookupAgain = false
                self.resolve(target)
                return
            }
            target.lookupSettled()
        }
    }

    /// Resolves `host` once, without a target, and gives its state.
    @discardableResult
    public func evaluate(host: String, completion: @escaping (TargetState) -> Void) -> Resolver.Lookup {
        resolver.lookup(host) { [unowned self] result in
            completion(self.state(of: Self.resolution(result)))
        }
    }

    /// Keeps the periodic re-resolution running exactly while host targets exist.
    public func hostTargetsChanged(count: Int) {
        if count == 0 {
            refreshTimer = nil
        } else if refreshTimer == nil {
            refreshTimer = Sources.every(seconds: refreshInterval) { [unowned self] in
                for target in self.targets() where target.kind == .host { self.resolve(target) }
                return true
            }
        }
    }
}
