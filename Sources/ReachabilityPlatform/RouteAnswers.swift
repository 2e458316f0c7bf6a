import ReachabilityCore
import ReachabilityFairness
import ReachabilityLoop

/// The kernel's route answers an evaluation reads, and how long each stays true.
///
/// Answers per address are kept until a kernel event can have changed them (the
/// events name the links whose answers went stale) or their lifetime ends; one
/// timer, at the earliest end among the answers in use, makes the evaluator ask
/// again then (no event says so). Address pairs' answers (a route from a local
/// address) are asked again after every change, never kept longer.
@LoopActor
final class RouteAnswers {
    /// An answer and when its lifetime ends (monotonic microseconds), if it has one.
    struct Cached {
        var route: RouteFact?
        var expires: Int64?
    }

    /// Where the answers come from (set when the evaluator starts).
    var source: NetworkFactSource?
    /// Kernel routes by address.
    private var routes: [IPAddress: Cached] = [:]
    /// Address pairs' answers for this evaluation only.
    private var pairs: [Pair: Cached] = [:]
    /// When the first answer in use stops being true on its own: the earliest end of a
    /// lifetime (`RouteFact.lifetime`) among the kept answers and the path's bound
    /// answers; `nil` when none has a lifetime.
    private(set) var nextExpiry: Int64?
    /// Ends at `nextExpiry`.
    private var expiryTimer: SourceHandle?
    /// Called when the timer ends: the answers are to be asked again (an evaluation).
    private let expired: () -> Void

    private struct Pair: Hashable {
        let local: IPAddress
        let remote: IPAddress
    }

    /// A lifetime is taken to have ended this early (the kernel counts it in ticks of
    /// up to 10 ms, and tells it rounded down): 20 ms.
    nonisolated static let expirySlack = ServiceLimits.standard.routeExpirySlack

    /// The most routes cached between two network changes: twice the most targets, so only a
    /// flood of addresses that nobody watches for long (queries, short-lived targets) can
    /// reach it; the cache then starts again, and watched addresses are looked up again in
    /// batches when next evaluated.
    static let routeCacheLimit = ServiceLimits.standard.routeCache

    init(expired: @escaping () -> Void) {
        self.expired = expired
    }

    /// Before an evaluation: forgets the pairs' answers, and the answers the kernel's events
    /// made stale (`stale`), or all of them (`everything`: a refresh).
    func startEvaluation(stale: RouteInvalidation, everything: Bool) {
        pairs.removeAll()
        if everything || stale.all {
            forgetAll()
            return
        }
        // Answers through links the events named, and answers whose lifetime has ended
        // (the cache is walked only when there is either).
        let now = MonotonicClock.microseconds()
        let lifetimeEnded = nextExpiry.map { $0 <= now + Self.expirySlack } ?? false
        guard !stale.links.isEmpty || lifetimeEnded else { return }
        routes = routes.filter { _, cached in
            if let expires = cached.expires, expires <= now + Self.expirySlack { return false }
            return !(cached.route.map { stale.links.contains($0.interfaceIndex) } ?? false)
        }
    }

    /// Forgets every kept answer.
    func forgetAll() { routes.removeAll(keepingCapacity: true) }

    /// Forgets the answers for `addresses` (a target is going away): a route cache full of
    /// addresses nobody watches pins the pages a peak left behind.
    func forget(_ addresses: [IPAddress]) {
        for address in addresses { routes[address] = nil }
    }

    /// Gives back the storage of the cache after many targets went away.
    func compact() { routes.shrinkIfSparse() }

    /// The kernel's route to `address`, kept.
    func route(to address: IPAddress) -> RouteFact? {
        if let cached = routes[address] { return cached.route }
        let route = source?.routes(to: [address]).first ?? nil
        remember(route, for: address)
        return route
    }

    /// `address` with its route, as the engine reads it.
    func addressRoute(_ address: IPAddress) -> Engine.AddressRoute {
        Engine.AddressRoute(address: address.description, family: address.family, route: route(to: address))
    }

    /// The route to `address` for a one-shot query: the kept answer, else the kernel's, not
    /// kept (a caller asking about ever new addresses must not grow the cache).
    func routeOnce(to address: IPAddress) -> RouteFact? {
        routes[address].map(\.route) ?? source?.routes(to: [address]).first ?? nil
    }

    /// The kernel's route from `local` to `remote`: kept for this evaluation unless `keep`
    /// is false (a one-shot query).
    func route(from local: IPAddress, to remote: IPAddress, keep: Bool) -> RouteFact? {
        let pair = Pair(local: local, remote: remote)
        if let answer = pairs[pair] { return answer.route }
        let answer = cached(source?.routes(pairs: [(local, remote)]).first ?? nil)
        if keep { pairs[pair] = kept(answer) }
        return answer.route
    }

    /// Looks the routes of `addresses` and `pairs` not known yet up, in batches, ahead of
    /// evaluating them.
    func prefetch(_ addresses: [IPAddress], pairs wanted: [(local: IPAddress, remote: IPAddress)] = []) {
        var missing: [IPAddress] = []
        var seen = Set<IPAddress>()
        for address in addresses where routes[address] == nil && seen.insert(address).inserted {
            missing.append(address)
        }
        guard let source else { return }
        if !missing.isEmpty {
            for (address, route) in zip(missing, source.routes(to: missing)) { remember(route, for: address) }
        }
        let newPairs = wanted.filter { pairs[Pair(local: $0.local, remote: $0.remote)] == nil }
        guard !newPairs.isEmpty else { return }
        for (pair, route) in zip(newPairs, source.routes(pairs: newPairs)) {
            pairs[Pair(local: pair.local, remote: pair.remote)] = cached(route)
        }
    }

    /// After an evaluation: arms the one timer at the earliest end of a lifetime among the
    /// answers in use and the path's (`pathExpiry`; none when no answer has one: a route
    /// without a lifetime arms nothing), and follows the neighbour state of the gateways
    /// the answers go through.
    func settle(pathExpiry: Int64?, pathGateways: [String]) {
        // One pass over the kept answers: their earliest end, and their gateways.
        var earliest = pathExpiry
        var gateways = Set(pathGateways)
        for cached in routes.values {
            if let expires = cached.expires { earliest = min(earliest ?? expires, expires) }
            if let gateway = cached.route?.gateway { gateways.insert(gateway) }
        }
        for cached in pairs.values {
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
                self.expired()
            }
        }
    }

    /// A new answer kept between evaluations (a target watched after the last one): its
    /// lifetime may end before the timer.
    private func kept(_ answer: Cached) -> Cached {
        if let expires = answer.expires, expires < nextExpiry ?? .max { armExpiry(at: expires) }
        return answer
    }

    private func remember(_ route: RouteFact?, for address: IPAddress) {
        if routes.count >= Self.routeCacheLimit { routes.removeAll() }
        routes[address] = kept(cached(route))
    }

    /// An answer to keep, with the end of its lifetime when it has one.
    private func cached(_ route: RouteFact?) -> Cached {
        Cached(route: route, expires: route?.lifetime.map { MonotonicClock.microseconds() + Int64($0) * 1000 })
    }
}
