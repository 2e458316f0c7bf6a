import Glibc
import Logging
import ReachabilityCore
import ReachabilityLoop

/// What the routing policy's uid rules change: the answers of callers whose uid
/// they route otherwise than the evaluating process, asked with that uid
/// (`RTA_UID`) once per answer class and evaluation. Nothing is asked while the
/// policy has no uid rule.
struct PerUserAnswers {
    /// The routing policy's uid rules, as of the last reload that followed a routing event.
    var uidRules = UIDRules()
    /// Route answers per answer class other than this process's, for this evaluation only.
    var routes: [AnswerClass: [IPAddress: RouteFact?]] = [:]
    /// The facts (their internet routes) per answer class other than this process's.
    var facts: [AnswerClass: NetworkFacts] = [:]
    /// How many route lookups were made for such callers.
    var lookups = 0

    /// A new evaluation: every answer is asked again.
    mutating func startEvaluation() {
        routes.removeAll()
        facts.removeAll()
    }
}

extension TargetEvaluator {
    /// The routing policy's uid rules, as of the last reload that followed a routing event.
    public var uidRules: UIDRules { users.uidRules }

    /// How many route lookups were made for callers whose uid the rules route otherwise:
    /// zero while the policy has no uid rule.
    public var classLookups: Int { users.lookups }

    /// The answer class of `uid` when the uid rules route its packets otherwise than this
    /// process's (whose answers are the shared ones); `nil` when they do not (no uid rule:
    /// always `nil`, and nothing more is asked).
    public func answerClass(of uid: UserID) -> AnswerClass? {
        guard !users.uidRules.isEmpty else { return nil }
        let answerClass = users.uidRules.answerClass(of: uid)
        return answerClass == users.uidRules.answerClass(of: getuid()) ? nil : answerClass
    }

    /// The paths as callers of `uid` see them: the shared ones (`pathState`) unless the uid
    /// rules route their packets otherwise, then the same links judged by their own internet
    /// routes (as `NWPathMonitor` in their process judges them), the network's identity
    /// kept. Once per answer class and evaluation.
    public func pathState(uid: UserID) -> PathState {
        guard isPathWanted, pathState != .none, let answerClass = answerClass(of: uid) else { return pathState }
        if let view = paths.views[answerClass] { return view }
        var view = Engine.evaluatePaths(internetFacts(uid: uid, answerClass: answerClass), bound: paths.bound,
                                        dnsConfigured: paths.dnsConfigured)
        view.networkIdentity = pathState.networkIdentity
        paths.views[answerClass] = view
        return view
    }

    /// Evaluates the answers of `target`'s holders whose uid the rules route otherwise,
    /// once per answer class; true when they changed. Nothing is asked while the policy
    /// has no uid rule, or no such user holds it.
    @discardableResult
    public func refreshViews(of target: WatchedTarget) -> Bool {
        var views: [AnswerClass: TargetState] = [:]
        if !users.uidRules.isEmpty {
            for user in sink?.holdingUsers(of: target) ?? [] {
                guard let answerClass = answerClass(of: user), views[answerClass] == nil else { continue }
                views[answerClass] = state(of: target, uid: user)
            }
        }
        guard views != target.views else { return false }
        target.views = views
        return true
    }

    /// The kernel's answers for `addresses` for packets of `uid` (of `answerClass`), once per
    /// class and evaluation.
    func routes(_ addresses: [IPAddress], uid: UserID, answerClass: AnswerClass) -> [RouteFact?] {
        var known = users.routes[answerClass] ?? [:]
        let missing = Array(Set(addresses.filter { known[$0] == nil }))
        if let source, !missing.isEmpty {
            users.lookups += missing.count
            // Within an evaluation its one line counts them; a query's are said here.
            if !isEvaluating { logger.debug("\(missing.count) lookups for other uids (uid \(uid))") }
            for (address, route) in zip(missing, source.routes(to: missing, uid: uid)) { known[address] = .some(route) }
        }
        users.routes[answerClass] = known
        return addresses.map { known[$0] ?? nil }
    }

    /// The state of `addresses` (a host's, or an address) for callers of `uid`.
    func evaluate(_ addresses: [IPAddress], uid: UserID, answerClass: AnswerClass) -> TargetState {
        let routes = routes(addresses, uid: uid, answerClass: answerClass)
        return Engine.evaluateAddresses(zip(addresses, routes).map {
            Engine.AddressRoute(address: $0.description, family: $0.family, route: $1)
        }, facts: facts)
    }

    /// The facts as callers of `uid` see them: their own internet routes (asked only for
    /// the internet; every other fact is the same for everybody).
    func internetFacts(uid: UserID, answerClass: AnswerClass) -> NetworkFacts {
        if let cached = users.facts[answerClass] { return cached }
        var own = facts
        if own.backend != .none {
            for (family, addresses) in Self.internetDestinations {
                own.internetRoutes[family] = routes(addresses, uid: uid, answerClass: answerClass)
            }
        }
        users.facts[answerClass] = own
        return own
    }
}
