import CGLib
import Glibc
import ReachabilityCore
import ReachabilityLoop

/// Turns network facts into target states, for the daemon and for the client
/// library's in-process mode alike: reads the facts once per burst of changes,
/// looks routes up per address (kept until a kernel event can have changed
/// them), and resolves host names — on every network change, on demand, and
/// on a refresh timer that exists only while host targets exist.
@LoopActor
public final class TargetEvaluator {
    private var source: NetworkFactSource?
    public let resolver = Resolver()
    public private(set) var facts: NetworkFacts = .unknown
    /// Whether the facts have been read at least once (a first answer exists).
    public private(set) var hasFacts = false
    /// Whether the last evaluation read every source's first answer (`NetworkFactSource.isSettled`):
    /// its states are the ones to give a first caller.
    public private(set) var isSettled = false
    /// Kernel routes by address.
    private var routes: [IPAddress: CachedRoute] = [:]
    private var refreshTimer: SourceHandle?
    /// When the first answer in use stops being true on its own: the earliest end of a
    /// lifetime (`RouteFact.lifetime`) among the cached answers and the path's bound
    /// answers, in monotonic microseconds; `nil` when none has a lifetime.
    public private(set) var nextExpiry: Int64?
    /// Ends at `nextExpiry`: the answers are asked again then (no event says so).
    private var expiryTimer: SourceHandle?
    /// The earliest end of a lifetime among the path's last bound answers.
    private var pathExpiry: Int64?

    /// Address pairs' answers (a route from a local address, or the link a local address
    /// is on) for this evaluation only: asked again after every change, never kept.
    private var pairAnswers: [TargetInput: CachedRoute] = [:]

    /// A cached answer and when its lifetime ends (monotonic microseconds), if it has one.
    private struct CachedRoute {
        var route: RouteFact?
        var expires: Int64?
    }
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
        source = try NetworkObserver(mode: mode) { [unowned self] in self.networkChanged() }
    }

    /// Reads the network from `source` instead (recorded answers a test replays); the
    /// test calls `networkChanged()` where the live source would have.
    public func start(source: NetworkFactSource) {
        self.source = source
    }

    /// Re-reads the facts after a change, and forgets the route answers the
    /// kernel's events made stale. `everything` (a refresh) forgets them all.
    /// The internet's routes are the kernel's answers for `internetDestinations`,
    /// looked up and cached like any other address's.
    public func reload(everything: Bool = false) {
        // Invalidation first: it reads the events still queued, which the facts must not predate.
        let stale = source?.takeRouteInvalidation() ?? RouteInvalidation(all: true)
        facts = source?.facts() ?? .unknown
        pairAnswers.removeAll()
        // The rules are read again only when a routing event (rules among them) came.
        if everything || stale.all || !hasFacts { uidRules = source?.uidRules() ?? UIDRules() }
        classAnswers.removeAll()
        classFacts.removeAll()
        if everything || stale.all {
            routes.removeAll(keepingCapacity: true)
        } else {
            // Answers through links the events named, and answers whose lifetime has ended
            // (the cache is walked only when there is either).
            let now = MonotonicClock.microseconds()
            let lifetimeEnded = nextExpiry.map { $0 <= now + Self.expirySlack } ?? false
            if !stale.links.isEmpty || lifetimeEnded {
                routes = routes.filter { _, cached in
                    if let expires = cached.expires, expires <= now + Self.expirySlack { return false }
                    return !(cached.route.map { stale.links.contains($0.interfaceIndex) } ?? false)
                }
            }
        }
        if facts.backend != .none {
            prefetchRoutes(Self.internetDestinations.flatMap(\.addresses))
            for (family, addresses) in Self.internetDestinations {
                facts.internetRoutes[family] = addresses.map(route)
            }
            if facts.links.values.contains(where: { $0.isUsable && Engine.isVPN($0, facts: facts) }) {
                facts.underlayLinks = underlayLinks()
            }
        }
        sink?.factsReloaded(facts)
    }

    /// The links a tunnel's packets can leave the machine through: those with a
    /// unicast route through a gateway (in any table: a host route to the VPN
    /// server is enough), and point-to-point links with any unicast route
    /// (`Engine.hasUnderlay` judges them). Asked on every reload while a VPN link
    /// can carry packets, never otherwise. `nil` (not asked) when this namespace
    /// has no link that is neither a VPN nor loopback: the tunnel's packets then
    /// leave from another namespace (a WireGuard device moved into a container),
    /// whose links cannot be seen from here.
    private func underlayLinks() -> Set<Int32>? {
        let candidates = facts.links.values.filter { $0.kernelType != .loopback && !Engine.isVPN($0, facts: facts) }
        guard !candidates.isEmpty, let source else { return nil }
        let routed = source.routedLinks()
        return routed.viaGateway.union(routed.onLink.filter { facts.links[$0]?.isPointToPoint == true })
    }

    /// A lifetime is taken to have ended this early (the kernel counts it in ticks of
    /// up to 10 ms, and tells it rounded down): 20 ms.
    nonisolated static let expirySlack: Int64 = 20_000

    /// Arms the one timer at the earliest end of a lifetime among the answers in use
    /// (none when no answer has one: a route without a lifetime arms nothing), and
    /// follows the neighbour state of the gateways the answers go through.
    private func answersSettled() {
        // One pass over the cached answers: their earliest end, and their gateways.
        var earliest = pathExpiry
        var gateways = Set(pathState.interfaces.flatMap(\.gateways))
        for cached in routes.values {
            if let expires = cached.expires { earliest = min(earliest ?? expires, expires) }
            if let gateway = cached.route?.gateway { gateways.insert(gateway) }
        }
        for cached in pairAnswers.values {
            if let expires = cached.expires { earliest = min(earliest ?? expires, expires) }
        }
        if earliest != nextExpiry || (earliest != nil && expiryTimer == nil) { armExpiry(at: earliest) }
        source?.follow(gateways: gateways)
    }

    /// The one timer, at `deadline` (none for `nil`).
    private func armExpiry(at deadline: Int64?) {
        nextExpiry = deadline
        expiryTimer = deadline.map { deadline in
            let wait = max(0, deadline - MonotonicClock.microseconds() + Self.expirySlack) / 1000
            // `nextExpiry` stays until the evaluation has dropped the answers that ended.
            return Sources.after(milliseconds: UInt32(clamping: wait)) { [unowned self] in
                self.expiryTimer = nil
                self.networkChanged()
            }
        }
    }

    /// A new answer kept between evaluations (a target watched after the last one): its
    /// lifetime may end before the timer.
    private func kept(_ answer: CachedRoute) -> CachedRoute {
        if let expires = answer.expires, expires < nextExpiry ?? .max { armExpiry(at: expires) }
        return answer
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
    public func networkChanged() {
        let start = MonotonicClock.microseconds()
        let lookupsBefore = classLookups
        isEvaluating = true
        defer { isEvaluating = false }
        reload()
        hasFacts = true
        isSettled = source?.isSettled ?? false
        let targets = sink?.evaluatedTargets ?? []
        prefetchRoutes(for: targets)
        defer { answersSettled() }
        let states = targets.map { state(of: $0) }
        let evaluated = MonotonicClock.microseconds()
        var changed: [WatchedTarget] = []
        for (target, state) in zip(targets, states) {
            if apply(state, to: target) { changed.append(target) }
        }
        let announced = MonotonicClock.microseconds()
        Instruments.evaluation.recordMicroseconds(evaluated - start)
        let path = isPathWanted ? "; " + evaluatePath(logged: false) : ""
        // One line per evaluation, naming what changed and why (the first few), the path's
        // evaluation and the lookups made for other users' uid rules included.
        Log.debug("evaluated \(targets.count) targets in \(Double(evaluated - start) / 1000) ms; "
                  + "announced \(changed.count) changes in \(Double(announced - evaluated) / 1000) ms"
                  + changed.prefix(5).map { "; \($0.kind == .internet ? "internet" : $0.name): \($0.state.summary)" }
                      .joined()
                  + (changed.count > 5 ? "; …" : "")
                  + (classLookups > lookupsBefore ? "; \(classLookups - lookupsBefore) lookups for other uids" : "")
                  + path)
        // Announced first; then the names are looked up again.
        for target in targets where target.kind == .host { resolve(target) }
        sink?.evaluationFinished()
    }

    /// Evaluates everything again from scratch: every fact re-read, every cached route
    /// forgotten, every host looked up again (a reload the administrator asks for).
    public func reevaluateEverything() {
        routes.removeAll(keepingCapacity: true)
        networkChanged()
    }

    /// Gives `target` a new state, and its holders whose uid the rules route otherwise their
    /// own answers (`refreshViews`); tells the sink, and returns true, when either changed.
    @discardableResult
    public func apply(_ state: TargetState, to target: WatchedTarget) -> Bool {
        // The holders' own answers first: an announcement tells each listener its own.
        let viewsChanged = refreshViews(of: target)
        guard let old = target.update(state) else {
            if viewsChanged { sink?.targetChanged(target, from: target.state) }
            return viewsChanged
        }
        sink?.targetChanged(target, from: old)
        return true
    }

    // MARK: Paths per interface

    /// After a reload outside a network change (`Refresh`): the paths follow the
    /// new facts too, while wanted.
    public func reloaded() {
        if isPathWanted && hasFacts { evaluatePath() }
        answersSettled()
    }

    /// Evaluates the `Path` facts from the current facts, asking the kernel for
    /// each link's bound routes, and tells the sink of a change. Says so in a debug line
    /// of its own unless `logged` is false: then the caller's line carries the words returned.
    @discardableResult
    private func evaluatePath(logged: Bool = true) -> String {
        let start = MonotonicClock.microseconds()
        let state: PathState
        if let source, facts.backend != .none {
            state = Engine.evaluatePaths(facts, bound: boundRoutes(source), dnsConfigured: source.dnsConfigured())
        } else {
            state = .none
            pathExpiry = nil
        }
        pathEvaluations += 1
        let changed = state != pathState
        pathState = state
        let words = "path evaluated in \(Double(MonotonicClock.microseconds() - start) / 1000) ms"
            + (changed ? " (\(state.summary))" : ", unchanged")
        if logged { Log.debug(words) }
        if changed { sink?.pathChanged(state) }
        return words
    }

    /// Every usable link's routes to the first internet destination of each family,
    /// for packets bound to it (`RTM_F_FIB_MATCH`), in one batch. Loopback and links
    /// that cannot carry packets (down, no carrier) are not asked: they are not usable
    /// whatever their routes.
    private func boundRoutes(_ source: NetworkFactSource) -> [Int32: Engine.BoundRoutes] {
        let links = facts.links.values.filter { $0.kernelType != .loopback && $0.isUsable }.map(\.index).sorted()
        let queries = links.flatMap { link in
            Self.internetDestinations.map { (address: $0.addresses[0], interface: link) }
        }
        pathExpiry = nil
        guard !queries.isEmpty else { return [:] }
        var result: [Int32: Engine.BoundRoutes] = [:]
        let now = MonotonicClock.microseconds()
        for (query, route) in zip(queries, source.routes(bound: queries)) {
            if let lifetime = route?.lifetime {
                pathExpiry = min(pathExpiry ?? .max, now + Int64(lifetime) * 1000)
            }
            if query.address.family == .ipv4 {
                result[query.interface, default: .init()].ipv4 = route
            } else {
                result[query.interface, default: .init()].ipv6 = route
            }
        }
        return result
    }

    private func route(_ address: IPAddress) -> RouteFact? {
        if let cached = routes[address] { return cached.route }
        let route = source?.routes(to: [address]).first ?? nil
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
        routes[address] = kept(cached(route))
    }

    /// Looks the routes of every address of `targets` up in batches, ahead of evaluating them
    /// (address pairs' routes from their local address too).
    func prefetchRoutes(for targets: [WatchedTarget]) {
        var addresses: [IPAddress] = []
        var pairs: [(local: IPAddress, remote: IPAddress)] = []
        for target in targets {
            switch (target.kind, target.resolution) {
            case (.address, _): if let address = target.address { addresses.append(address) }
            case (.host, .resolved(let list)): addresses += list
            case (.pair, _):
                if let local = target.local, let remote = target.address, pairAnswers[target.input] == nil {
                    pairs.append((local, remote))
                }
            default: break
            }
        }
        prefetchRoutes(addresses)
        guard let source, !pairs.isEmpty else { return }
        for (pair, route) in zip(pairs, source.routes(pairs: pairs)) {
            pairAnswers[.pair(local: pair.local, remote: pair.remote)] = cached(route)
        }
    }

    /// An answer to keep, with the end of its lifetime when it has one.
    private func cached(_ route: RouteFact?) -> CachedRoute {
        CachedRoute(route: route, expires: route?.lifetime.map { MonotonicClock.microseconds() + Int64($0) * 1000 })
    }

    /// An address pair's state: the route from its local address to its remote one (the
    /// remote address alone without a local one, as any address target), or, with only a
    /// local address, whether a link that can carry packets has it.
    /// A one-shot query's answer (`keep` false) is not kept.
    private func pairState(local: IPAddress?, remote: IPAddress?, keep: Bool = true) -> TargetState {
        let input = TargetInput.pair(local: local, remote: remote)
        switch (local, remote) {
        case (let local?, let remote?):
            let answer = pairAnswers[input] ?? cached(source?.routes(pairs: [(local, remote)]).first ?? nil)
            if keep, pairAnswers[input] == nil { pairAnswers[input] = kept(answer) }
            return Engine.evaluateAddresses(
                [Engine.AddressRoute(address: remote.description, family: remote.family, route: answer.route)],
                facts: facts)
        case (nil, let remote?):
            return keep ? Engine.evaluateAddresses([addressRoute(remote)], facts: facts) : state(of: remote)
        case (let local?, nil):
            return Engine.evaluateLocal(local.description, family: local.family,
                                        link: source?.link(holding: local), facts: facts)
        case (nil, nil):
            return .unknown
        }
    }

    /// Looks the routes of `addresses` not in the cache up, in batches.
    private func prefetchRoutes(_ addresses: [IPAddress]) {
        var wanted: [IPAddress] = []
        var seen = Set<IPAddress>()
        for address in addresses where routes[address] == nil && seen.insert(address).inserted {
            wanted.append(address)
        }
        guard let source, !wanted.isEmpty else { return }
        for (address, route) in zip(wanted, source.routes(to: wanted)) { remember(route, for: address) }
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
        case .pair:
            return pairState(local: target.local, remote: target.address)
        }
    }

    /// The state of an address pair now, for a one-shot query (nothing is kept).
    public func state(ofPair local: IPAddress?, _ remote: IPAddress?) -> TargetState {
        pairState(local: local, remote: remote, keep: false)
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

    // MARK: Answers per caller (uid rules)

    /// The routing policy's uid rules, as of the last reload that followed a routing event.
    public private(set) var uidRules = UIDRules()
    /// Route answers per answer class other than this process's, for this evaluation only.
    private var classAnswers: [AnswerClass: [IPAddress: RouteFact?]] = [:]
    /// The facts (their internet routes) per answer class other than this process's.
    private var classFacts: [AnswerClass: NetworkFacts] = [:]
    /// How many route lookups were made for callers whose uid the rules route otherwise:
    /// zero while the policy has no uid rule.
    public private(set) var classLookups = 0
    /// Within `networkChanged()`: its one debug line tells what was done.
    private var isEvaluating = false

    /// The answer class of `uid` when the uid rules route its packets otherwise than this
    /// process's (whose answers are the shared ones); `nil` when they do not (no uid rule:
    /// always `nil`, and nothing more is asked).
    public func answerClass(of uid: UserID) -> AnswerClass? {
        guard !uidRules.isEmpty else { return nil }
        let answerClass = uidRules.answerClass(of: uid)
        return answerClass == uidRules.answerClass(of: getuid()) ? nil : answerClass
    }

    /// The kernel's answers for `addresses` for packets of `uid` (of `answerClass`), once per
    /// class and evaluation.
    private func routes(_ addresses: [IPAddress], uid: UserID, answerClass: AnswerClass) -> [RouteFact?] {
        var known = classAnswers[answerClass] ?? [:]
        let missing = Array(Set(addresses.filter { known[$0] == nil }))
        if let source, !missing.isEmpty {
            classLookups += missing.count
            // Within an evaluation its one line counts them; a query's are said here.
            if !isEvaluating { Log.debug("\(missing.count) lookups for other uids (uid \(uid))") }
            for (address, route) in zip(missing, source.routes(to: missing, uid: uid)) { known[address] = .some(route) }
        }
        classAnswers[answerClass] = known
        return addresses.map { known[$0] ?? nil }
    }

    /// The facts as callers of `uid` see them: their own internet routes (asked only for
    /// the internet; every other fact is the same for everybody).
    private func internetFacts(uid: UserID, answerClass: AnswerClass) -> NetworkFacts {
        if let cached = classFacts[answerClass] { return cached }
        var own = facts
        if own.backend != .none {
            for (family, addresses) in Self.internetDestinations {
                own.internetRoutes[family] = routes(addresses, uid: uid, answerClass: answerClass)
            }
        }
        classFacts[answerClass] = own
        return own
    }

    /// The state of `target` for callers of `uid`: its shared state, unless the uid rules
    /// route that user's packets otherwise; then evaluated with its uid in every lookup
    /// (`RTA_UID`), once per answer class.
    public func state(of target: WatchedTarget, uid: UserID) -> TargetState {
        guard answerClass(of: uid) != nil else { return target.state }
        if target.kind == .pair { return state(ofPair: target.local, target.address, uid: uid) }
        guard let answerClass = answerClass(of: uid) else { return target.state }
        func evaluate(_ addresses: [IPAddress]) -> TargetState {
            let routes = routes(addresses, uid: uid, answerClass: answerClass)
            return Engine.evaluateAddresses(zip(addresses, routes).map {
                Engine.AddressRoute(address: $0.description, family: $0.family, route: $1)
            }, facts: facts)
        }
        switch (target.kind, target.resolution) {
        case (.internet, _): return Engine.evaluateInternet(internetFacts(uid: uid, answerClass: answerClass))
        case (.address, _): return evaluate([target.address!])
        case (.host, .resolved(let addresses)): return evaluate(addresses)
        default: return target.state
        }
    }

    /// Evaluates the answers of `target`'s holders whose uid the rules route otherwise,
    /// once per answer class; true when they changed. Nothing is asked while the policy
    /// has no uid rule, or no such user holds it.
    @discardableResult
    public func refreshViews(of target: WatchedTarget) -> Bool {
        var views: [AnswerClass: TargetState] = [:]
        if !uidRules.isEmpty {
            for user in sink?.holdingUsers(of: target) ?? [] {
                guard let answerClass = answerClass(of: user), views[answerClass] == nil else { continue }
                views[answerClass] = state(of: target, uid: user)
            }
        }
        guard views != target.views else { return false }
        target.views = views
        return true
    }

    /// An address pair's state for callers of `uid`: the route from its local address with
    /// their uid (a pair with only a local address is the same for everybody: its link).
    /// Not kept: pairs' answers are asked again after every change anyway.
    public func state(ofPair local: IPAddress?, _ remote: IPAddress?, uid: UserID) -> TargetState {
        guard answerClass(of: uid) != nil, let remote else { return pairState(local: local, remote: remote, keep: false) }
        guard let local else { return state(of: remote, uid: uid) }
        classLookups += 1
        let route = source?.routes(pairs: [(local, remote)], uid: uid).first ?? nil
        return Engine.evaluateAddresses(
            [Engine.AddressRoute(address: remote.description, family: remote.family, route: route)], facts: facts)
    }

    /// The internet's state now for callers of `uid`.
    public func internetState(uid: UserID) -> TargetState {
        guard let answerClass = answerClass(of: uid) else { return internetState }
        return Engine.evaluateInternet(internetFacts(uid: uid, answerClass: answerClass))
    }

    /// An address's state now for callers of `uid`, for a one-shot query.
    public func state(of address: IPAddress, uid: UserID) -> TargetState {
        guard let answerClass = answerClass(of: uid) else { return state(of: address) }
        let route = routes([address], uid: uid, answerClass: answerClass)[0]
        return Engine.evaluateAddresses(
            [Engine.AddressRoute(address: address.description, family: address.family, route: route)],
            facts: facts)
    }

    /// A host's state with this resolution for callers of `uid`.
    public func state(of resolution: WatchedTarget.Resolution, uid: UserID) -> TargetState {
        guard let answerClass = answerClass(of: uid), case .resolved(let addresses) = resolution else {
            return state(of: resolution)
        }
        let routes = routes(addresses, uid: uid, answerClass: answerClass)
        return Engine.evaluateAddresses(zip(addresses, routes).map {
            Engine.AddressRoute(address: $0.description, family: $0.family, route: $1)
        }, facts: facts)
    }

    /// The state of an address now, for a one-shot query: its route is not kept (a caller
    /// asking about ever new addresses must not grow the cache).
    public func state(of address: IPAddress) -> TargetState {
        let route = routes[address].map(\.route) ?? source?.routes(to: [address]).first ?? nil
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
    public func evaluate(host: String, owner: UserID = getuid(), completion: @escaping (TargetState) -> Void)
        -> Resolver.Lookup
    {
        resolver.lookup(host, owner: owner) { [unowned self] result in
            completion(self.state(of: Self.resolution(result), uid: owner))
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
