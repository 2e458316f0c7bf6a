import ReachabilityCore
import ReachabilityLoop

/// What differs per kind of target in the engine, each rule one exhaustive `switch` over
/// `WatchedTarget.spec`: a new kind is a compile error here until it has its own. A host's
/// lookups are its `host` (present exactly for `.host`: `WatchedTarget.init`).
extension TargetEvaluator {
    /// The state of `target` from the current facts (and, for a host, its last lookup).
    public func state(of target: WatchedTarget) -> TargetState {
        switch target.spec {
        case .internet:
            return Engine.evaluateInternet(facts)
        case .host:
            return state(of: target.host?.resolution ?? .pending)
        case .address(let address):
            return Engine.evaluateAddresses([answers.addressRoute(address)], facts: facts)
        case .pair(let local, let remote):
            return pairState(local: local, remote: remote)
        }
    }

    /// The state of `target` for callers of `uid`: its shared state, unless the uid rules
    /// route that user's packets otherwise; then evaluated with its uid in every lookup
    /// (`RTA_UID`), once per answer class.
    public func state(of target: WatchedTarget, uid: UserID) -> TargetState {
        guard let answerClass = answerClass(of: uid) else { return target.state }
        switch target.spec {
        case .internet:
            return Engine.evaluateInternet(internetFacts(uid: uid, answerClass: answerClass))
        case .host:
            guard case .resolved(let addresses)? = target.host?.resolution else { return target.state }
            return evaluate(addresses, uid: uid, answerClass: answerClass)
        case .address(let address):
            return evaluate([address], uid: uid, answerClass: answerClass)
        case .pair(let local, let remote):
            return state(ofPair: local, remote, uid: uid)
        }
    }

    /// Looks the routes of every address of `targets` up in batches, ahead of evaluating them
    /// (address pairs' routes from their local address too).
    func prefetchRoutes(for targets: [WatchedTarget]) {
        var addresses: [IPAddress] = []
        var pairs: [(local: IPAddress, remote: IPAddress)] = []
        for target in targets {
            switch target.spec {
            case .internet: break  // its routes are read with the facts (`reload`)
            case .host: addresses += target.host?.addresses ?? []
            case .address(let address): addresses.append(address)
            case .pair(let local?, let remote?): pairs.append((local, remote))
            case .pair: break  // one address: its route, or its link, when evaluated
            }
        }
        answers.prefetch(addresses, pairs: pairs)
    }

    /// Forgets the cached routes of `target`'s addresses (it is going away): a route cache
    /// full of addresses nobody watches pins the pages a peak left behind.
    public func forgetRoutes(of target: WatchedTarget) {
        switch target.spec {
        case .host: answers.forget(target.host?.addresses ?? [])
        case .address(let address): answers.forget([address])
        case .internet, .pair: break  // the internet's stay; a pair's are not kept
        }
    }

    /// The state of a host with this resolution.
    public func state(of resolution: WatchedHost.Resolution) -> TargetState {
        switch resolution {
        case .pending:
            return .unknown
        case .failed(let message):
            return Engine.resolutionFailed(message, facts: facts)
        case .resolved(let addresses):
            return Engine.evaluateAddresses(addresses.map(answers.addressRoute), facts: facts)
        }
    }

    /// An address pair's state: the route from its local address to its remote one (the
    /// remote address alone without a local one, as any address target), or, with only a
    /// local address, whether a link that can carry packets has it.
    /// A one-shot query's answer (`keep` false) is not kept.
    func pairState(local: IPAddress?, remote: IPAddress?, keep: Bool = true) -> TargetState {
        switch (local, remote) {
        case (let local?, let remote?):
            let route = answers.route(from: local, to: remote, keep: keep)
            return Engine.evaluateAddresses(
                [Engine.AddressRoute(address: remote.description, family: remote.family, route: route)],
                facts: facts)
        case (nil, let remote?):
            return keep ? Engine.evaluateAddresses([answers.addressRoute(remote)], facts: facts) : state(of: remote)
        case (let local?, nil):
            return Engine.evaluateLocal(local.description, family: local.family,
                                        link: source?.link(holding: local), facts: facts)
        case (nil, nil):
            return .unknown
        }
    }
}
