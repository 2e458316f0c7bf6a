import ReachabilityCore
import ReachabilityLoop

/// One-shot answers (`Query`, the library's queries): evaluated now from the current
/// facts, each caller's own, and kept nowhere (a caller asking about ever new
/// addresses must not grow the cache). A host's is `evaluate(host:owner:completion:)`.
extension TargetEvaluator {
    /// The internet's state now.
    public var internetState: TargetState { Engine.evaluateInternet(facts) }

    /// The internet's state now for callers of `uid`.
    public func internetState(uid: UserID) -> TargetState {
        guard let answerClass = answerClass(of: uid) else { return internetState }
        return Engine.evaluateInternet(internetFacts(uid: uid, answerClass: answerClass))
    }

    /// The state of an address now: its route is not kept. The unspecified address (0.0.0.0,
    /// `::`) is Apple's zero address, the internet, as `WatchedTarget` watches it: `Query`
    /// and `Watch…` of the same text agree.
    public func state(of address: IPAddress) -> TargetState {
        if AddressText.isUnspecified(address.description) { return internetState }
        return Engine.evaluateAddresses(
            [Engine.AddressRoute(address: address.description, family: address.family,
                                 route: answers.routeOnce(to: address))],
            facts: facts)
    }

    /// An address's state now for callers of `uid`.
    public func state(of address: IPAddress, uid: UserID) -> TargetState {
        if AddressText.isUnspecified(address.description) { return internetState(uid: uid) }
        guard let answerClass = answerClass(of: uid) else { return state(of: address) }
        return evaluate([address], uid: uid, answerClass: answerClass)
    }

    /// The state of an address pair now (nothing is kept).
    public func state(ofPair local: IPAddress?, _ remote: IPAddress?) -> TargetState {
        pairState(local: local, remote: remote, keep: false)
    }

    /// An address pair's state for callers of `uid`: the route from its local address with
    /// their uid (a pair with only a local address is the same for everybody: its link).
    /// Not kept: pairs' answers are asked again after every change anyway.
    public func state(ofPair local: IPAddress?, _ remote: IPAddress?, uid: UserID) -> TargetState {
        guard answerClass(of: uid) != nil, let remote else { return pairState(local: local, remote: remote, keep: false) }
        guard let local else { return state(of: remote, uid: uid) }
        users.lookups += 1
        let route = source?.routes(pairs: [(local, remote)], uid: uid).first ?? nil
        return Engine.evaluateAddresses(
            [Engine.AddressRoute(address: remote.description, family: remote.family, route: route)], facts: facts)
    }

    /// A host's state with this resolution for callers of `uid`.
    public func state(of resolution: WatchedHost.Resolution, uid: UserID) -> TargetState {
        guard let answerClass = answerClass(of: uid), case .resolved(let addresses) = resolution else {
            return state(of: resolution)
        }
        return evaluate(addresses, uid: uid, answerClass: answerClass)
    }
}
