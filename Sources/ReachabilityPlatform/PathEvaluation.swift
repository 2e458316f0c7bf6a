import ReachabilityCore
import ReachabilityLoop

/// The per-interface paths (the `Path` interface, `NWPath`): each usable link's
/// routes for packets bound to it, read from the kernel only while somebody wants
/// the paths (`TargetEvaluator.isPathWanted`).
@LoopActor
final class PathEvaluation {
    /// The paths as of the last evaluation; `.none` while nobody wants them.
    var state = PathState.none
    /// How many times the paths were evaluated.
    private(set) var count = 0
    /// The earliest end of a lifetime among the last bound answers (monotonic µs).
    private(set) var expiry: Int64?

    /// What the last evaluation saw that invalidations compare (`nil`: none yet since the
    /// paths were wanted), and the last network that had an identity.
    var observed: NetworkIdentity.Observed?
    var lastNetwork = ""
    /// The network the default routes lead to, followed from one evaluation to the next.
    var tracker = NetworkIdentity.Tracker()
    /// The SSID each Wi-Fi link was last seen on: one without an active access point for a
    /// moment (a roam) is taken as still on it.
    var ssids = NetworkIdentity.SSIDs()
    /// The last evaluation's bound routes and whether DNS was configured: what the paths of
    /// callers whose uid the rules route otherwise are evaluated from, with their own
    /// internet routes (`TargetEvaluator.pathState(uid:)`).
    private(set) var bound: [Int32: Engine.BoundRoutes] = [:]
    private(set) var dnsConfigured = false
    /// Those callers' paths, per answer class, for this evaluation only.
    var views: [AnswerClass: PathState] = [:]

    /// Evaluates the paths from `facts`, asking `source` for each link's bound routes;
    /// returns whether they changed, why connections made before may be broken (`nil`:
    /// nothing, or the first evaluation), and a few words for the log.
    func evaluate(_ facts: NetworkFacts, source: NetworkFactSource?)
        -> (changed: Bool, invalidation: InvalidationReason?, words: String)
    {
        let start = MonotonicClock.microseconds()
        var new: PathState
        var seen = NetworkIdentity.Observed()
        views.removeAll()
        if let source, facts.backend != .none {
            bound = boundRoutes(facts, source)
            dnsConfigured = source.dnsConfigured()
            new = Engine.evaluatePaths(facts, bound: bound, dnsConfigured: dnsConfigured)
            seen = observe(new, facts, source)
            new.networkIdentity = seen.identity
        } else {
            new = .none
            expiry = nil
            bound = [:]
        }
        count += 1
        let invalidation = observed.flatMap { NetworkIdentity.invalidation(from: $0, to: seen, lastNetwork: lastNetwork) }
        observed = NetworkIdentity.carried(from: observed, into: seen)
        if !seen.identity.isEmpty { lastNetwork = seen.identity }
        let changed = new != state
        state = new
        let words = "path evaluated in \(Double(MonotonicClock.microseconds() - start) / 1000) ms"
            + (changed ? " (\(new.summary))" : ", unchanged") + (invalidation.map { "; invalidated: \($0.rawValue)" } ?? "")
        return (changed, invalidation, words)
    }

    /// Nobody wants the paths any more: the next evaluation is a first one.
    func reset() {
        state = .none
        observed = nil
        views.removeAll()
    }

    /// Every usable link's routes to the first internet destination of each family,
    /// for packets bound to it (`RTM_F_FIB_MATCH`), in one batch. Loopback and links
    /// that cannot carry packets (down, no carrier) are not asked: they are not usable
    /// whatever their routes.
    private func boundRoutes(_ facts: NetworkFacts, _ source: NetworkFactSource) -> [Int32: Engine.BoundRoutes] {
        let links = facts.links.values.filter { $0.kernelType != .loopback && $0.isUsable }.map(\.index).sorted()
        let queries = links.flatMap { link in
            TargetEvaluator.internetDestinations.map { (address: $0.addresses[0], interface: link) }
        }
        expiry = nil
        guard !queries.isEmpty else { return [:] }
        var result: [Int32: Engine.BoundRoutes] = [:]
        let now = MonotonicClock.microseconds()
        for (query, route) in zip(queries, source.routes(bound: queries)) {
            if let lifetime = route?.lifetime {
                expiry = min(expiry ?? .max, now + Int64(lifetime) * 1000)
            }
            if query.address.family == .ipv4 {
                result[query.interface, default: .init()].ipv4 = route
            } else {
                result[query.interface, default: .init()].ipv6 = route
            }
        }
        return result
    }
}
