import CGLib
import ReachabilityCore
import ReachabilityLoop

/// Turns network facts into target states, for the daemon and for the client
/// library's in-process mode alike: reads the facts once per burst of changes,
/// looks routes up per address (kept until a kernel event can have changed
/// them), and resolves host names — on every network change, on demand, and
/// on a refresh timer that exists only while host targets exist.
@LoopActor
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

    /// Where every result goes (weak: the sink owns this evaluator).
    public weak var sink: EvaluationSink?

    /// Whether anybody wants the per-interface paths (the `Path` interface): they are
    /// evaluated after each change only while this is set, and at once when it is
    /// set (once the facts were read), so `pathState` is current when it returns.
    /// Cleared, nothing is asked of the kernel for them and `pathState` is `.none`.
    public var isPathWanted = false {
        didSet {
            guard isPathWanted != oldValue else { return }
            if isPathWanted {
                if hasFacts { evaluatePath() }
            } else {
                pathState = .none
            }
        }
    }
    /// The per-interface paths, as of the last evaluation while `isPathWanted` was set.
    public private(set) var pathState = PathState.none
    /// How many times the paths were evaluated: an in-process test can check that none
    /// happens while they are not wanted (the daemon logs each one with `--verbose`).
    public private(set) var pathEvaluations = 0

    public init(refreshInterval: UInt32) {
        self.refreshInterval = refreshInterval
    }

    /// Starts watching the network; the first evaluation follows on the loop.
    public func start(mode: BackendMode) throws(NetlinkError) {
        observer = try NetworkObserver(mode: mode) { [unowned self] in self.networkChanged() }
    }

    /// Re-reads the facts after a change, and forgets the route answers the
    /// kernel's events made stale. `everything` (a refresh) forgets them all.
    /// The internet's routes are the kernel's answers for `internetDestinations`,
    /// looked up and cached like any other address's.
    public func reload(everything: Bool = false) {
        // Invalidation first: it reads the events still queued, which the facts must not predate.
        let stale = observer?.takeRouteInvalidation() ?? RouteInvalidation(all: true)
        facts = observer?.facts() ?? .unknown
        if everything || stale.all {
            routes.removeAll(keepingCapacity: true)
        } else if !stale.links.isEmpty {
            routes = routes.filter { _, route in !(route.map { stale.links.contains($0.interfaceIndex) } ?? false) }
        }
        if facts.backend != .none {
            prefetchRoutes(Self.internetDestinations.flatMap(\.addresses))
            for (family, addresses) in Self.internetDestinations {
                facts.internetRoutes[family] = addresses.map(route)
            }
            if facts.links.values.contains(where: { $0.isUsable && Engine.isVPN($0, facts: facts) }) {
                facts.underlayRoutes = underlayRoutes()
            }
        }
        sink?.factsReloaded(facts)
    }

    /// The kernel's routes to the first internet destination of each family for
    /// packets bound to each usable link that is neither a VPN nor loopback: the
    /// paths a tunnel's own packets can take (`Engine.hasUnderlay`). Asked on
    /// every reload while a VPN link can carry packets, never otherwise. `nil`
    /// (not asked) when this namespace has no such link at all, usable or not:
    /// the tunnel's packets then leave from another namespace (a WireGuard
    /// device moved into a container), whose links cannot be seen from here.
    private func underlayRoutes() -> [RouteFact?]? {
        let candidates = facts.links.values.filter { $0.kernelType != .loopback && !Engine.isVPN($0, facts: facts) }
        guard !candidates.isEmpty else { return nil }
        let queries = candidates.filter(\.isUsable).map(\.index).sorted().flatMap { link in
            Self.internetDestinations.map { (address: $0.addresses[0], interface: link) }
        }
        guard let observer, !queries.isEmpty else { return [] }
        return observer.routes(bound: queries)
    }

    /// What the internet target asks the kernel: the route a packet to each of
    /// these global unicast addresses would take. None is in a special-purpose
    /// block (RFC 6890: no documentation, benchmarking or shared-address range
    /// that labs and test networks route), each belongs to a different operator
    /// and a different /8 (or /16), and the family's path is the one most of
    /// them take, so a split tunnel or a lab route that covers one does not
    /// speak for the internet. No packet is ever sent to them: `RTM_GETROUTE` is
    /// a lookup in the kernel's tables and rules, nothing more.
    public nonisolated static let internetDestinations: [(family: AddressFamily, addresses: [IPAddress])] = [
        (.ipv4, ["8.8.8.8", "1.1.1.1", "9.9.9.9"].map { try! IPAddress(parsing: $0) }),
        (.ipv6, ["2001:4860:4860::8888", "2606:4700:4700::1111", "2620:fe::fe"].map { try! IPAddress(parsing: $0) }),
    ]

    /// One evaluation of every target after a burst of changes; host names are
    /// looked up again (their routes are re-evaluated at once meanwhile).
    func networkChanged() {
        let start = MonotonicClock.microseconds()
        reload()
        hasFacts = true
        let targets = sink?.evaluatedTargets ?? []
        prefetchRoutes(for: targets)
        let states = targets.map { state(of: $0) }
        let evaluated = MonotonicClock.microseconds()
        var changed = 0
        for (target, state) in zip(targets, states) where apply(state, to: target) {
            changed += 1
        }
        let announced = MonotonicClock.microseconds()
        Instruments.evaluation.recordMicroseconds(evaluated - start)
        Log.debug("evaluated \(targets.count) targets in \(Double(evaluated - start) / 1000) ms; "
                  + "announced \(changed) changes in \(Double(announced - evaluated) / 1000) ms")
        if isPathWanted { evaluatePath() }
        // Announced first; then the names are looked up again.
        for target in targets where target.kind == .host { resolve(target) }
        sink?.evaluationFinished()
    }

    /// Gives `target` a new state; tells the sink, and returns true, when it changed.
    @discardableResult
    public func apply(_ state: TargetState, to target: WatchedTarget) -> Bool {
        guard let old = target.update(state) else { return false }
        sink?.targetChanged(target, from: old)
        return true
    }

    // MARK: Paths per interface

    /// After a reload outside a network change (`Refresh`): the paths follow the
    /// new facts too, while wanted.
    public func reloaded() {
        if isPathWanted && hasFacts { evaluatePath() }
    }

    /// Evaluates the `Path` facts from the current facts, asking the kernel for
    /// each link's bound routes, and tells the sink of a change.
    private func evaluatePath() {
        let start = MonotonicClock.microseconds()
        let state: PathState
        if let observer, facts.backend != .none {
            state = Engine.evaluatePaths(facts, bound: boundRoutes(observer), dnsConfigured: observer.dnsConfigured())
        } else {
            state = .none
        }
        pathEvaluations += 1
        let changed = state != pathState
        pathState = state
        Log.debug("path evaluated in \(Double(MonotonicClock.microseconds() - start) / 1000) ms"
                  + (changed ? "; changed" : "; unchanged"))
        if changed { sink?.pathChanged(state) }
    }

    /// Every usable link's routes to the first internet destination of each family,
    /// for packets bound to it (`RTM_F_FIB_MATCH`), in one batch. Loopback and links
    /// that cannot carry packets (down, no carrier) are not asked: they are not usable
    /// whatever their routes.
    private func boundRoutes(_ observer: NetworkObserver) -> [Int32: Engine.BoundRoutes] {
        let links = facts.links.values.filter { $0.kernelType != .loopback && $0.isUsable }.map(\.index).sorted()
        let queries = links.flatMap { link in
            Self.internetDestinations.map { (address: $0.addresses[0], interface: link) }
        }
        guard !queries.isEmpty else { return [:] }
        var result: [Int32: Engine.BoundRoutes] = [:]
        for (query, route) in zip(queries, observer.routes(bound: queries)) {
            if query.address.family == .ipv4 {
                result[query.interface, default: .init()].ipv4 = route
            } else {
                result[query.interface, default: .init()].ipv6 = route
            }
        }
        return result
    }

    private func route(_ address: IPAddress) -> RouteFact? {
        if let cached = routes[address] { return cached }
        let route = observer?.routes(to: [address]).first ?? nil
        remember(route, for: address)
        return route
    }

    /// The most routes cached between two network changes: twice the most targets, so only a
    /// flood of addresses that nobody watches for long (queries, short-lived targets) can
    /// reach it; the cache then starts again, and watched addresses are looked up again in
    /// batches when next evaluated.
    static let routeCacheLimit = 32_768

    /// Forgets the cached routes of `target`'s addresses (it is going away): a route cache
    /// full of addresses nobody watches pins the pages a peak left behind.
    public func forgetRoutes(of target: WatchedTarget) {
        switch (target.kind, target.resolution) {
        case (.address, _): if let address = target.address { routes[address] = nil }
        case (.host, .resolved(let list)): for address in list { routes[address] = nil }
        default: break
        }
    }

    /// Gives back the storage of the route cache after many targets went away.
    public func compactRoutes() { routes.shrinkIfSparse() }

    private func remember(_ route: RouteFact?, for address: IPAddress) {
        if routes.count >= Self.routeCacheLimit { routes.removeAll() }
        routes[address] = route
    }

    /// Looks the routes of every address of `targets` up in batches, ahead of evaluating them.
    func prefetchRoutes(for targets: [WatchedTarget]) {
        var addresses: [IPAddress] = []
        for target in targets {
            switch (target.kind, target.resolution) {
            case (.address, _): if let address = target.address { addresses.append(address) }
            case (.host, .resolved(let list)): addresses += list
            default: break
            }
        }
        prefetchRoutes(addresses)
    }

    /// Looks the routes of `addresses` not in the cache up, in batches.
    private func prefetchRoutes(_ addresses: [IPAddress]) {
        var wanted: [IPAddress] = []
        var seen = Set<IPAddress>()
        for address in addresses where routes[address] == nil && seen.insert(address).inserted {
            wanted.append(address)
        }
        guard let observer, !wanted.isEmpty else { return }
        for (address, route) in zip(wanted, observer.routes(to: wanted)) { remember(route, for: address) }
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

    /// The state of an address now, for a one-shot query: its route is not kept (a caller
    /// asking about ever new addresses must not grow the cache).
    public func state(of address: IPAddress) -> TargetState {
        let route = routes[address] ?? observer?.routes(to: [address]).first ?? nil
        return Engine.evaluateAddresses(
            [Engine.AddressRoute(address: address.description, family: address.family, route: route)], facts: facts)
    }

    // MARK: Host resolution

    /// The resolver's result as a resolution (it only returns valid literals).
    nonisolated static func resolution(_ result: Result<[String], Resolver.ResolveError>) -> WatchedTarget.Resolution {
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
        target.lookup = resolver.lookup(target.name, owner: target.owner) { [unowned self, unowned target] result in
            target.lookup = nil
            target.resolution = Self.resolution(result)
            self.apply(self.state(of: target), to: target)
            if target.lookupAgain {
                // Whoever waits for a fresh answer waits for the next lookup.
                target.lookupAgain = false
                self.resolve(target)
                return
            }
            self.sink?.lookupSettled(target)
        }
    }

    /// Resolves `host` once, without a target, in `owner`'s turn, and gives its state.
    @discardableResult
    public func evaluate(host: String, owner: UserID = 0, completion: @escaping (TargetState) -> Void)
        -> Resolver.Lookup
    {
        resolver.lookup(host, owner: owner) { [unowned self] result in
            completion(self.state(of: Self.resolution(result)))
        }
    }

    /// Keeps the periodic re-resolution running exactly while host targets exist.
    public func hostTargetsChanged(count: Int) {
        if count == 0 {
            refreshTimer = nil
        } else if refreshTimer == nil {
            refreshTimer = Sources.every(seconds: refreshInterval) { [unowned self] in
                for target in self.sink?.evaluatedTargets ?? [] where target.kind == .host { self.resolve(target) }
                return true
            }
        }
    }
}
