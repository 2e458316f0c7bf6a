import Glibc
import ReachabilityCore
import ReachabilityLoop

/// Host names, looked up through the evaluator's `NameResolver`: on every network
/// change (the resolver's files — resolv.conf, /etc/hosts, nsswitch.conf — included), on
/// demand (`Refresh`, a new target), every `refreshInterval` seconds while host targets
/// exist, when their answer's lifetime runs out (a name not found: its negative answer's),
/// and again shortly after a temporary failure (`LookupSchedule`).
extension TargetEvaluator {
    /// Looks `target`'s name up (again) when it is looked up at all; a lookup in flight is
    /// followed by one more. Its answer is applied at once (`apply`), and the sink hears
    /// `lookupFinished` once no other lookup follows. A new reason to look up (a network
    /// change, `Refresh`, a new target) starts the retries after temporary failures afresh.
    public func resolve(_ target: WatchedTarget) {
        resolve(target, afresh: true)
    }

    /// Looks `target`'s name up; any retry owed is made now instead. `afresh`: the retries of
    /// temporary failures start again from the shortest wait (not so for the refresh timer
    /// and the retries themselves, or a name whose server stays silent would be asked
    /// `delays.count` more times each refresh interval).
    func resolve(_ target: WatchedTarget, afresh: Bool) {
        guard let host = target.host else { return }
        schedule.forget(host)
        if afresh { host.temporaryFailures = 0 }
        if host.isAskingLifetime {
            // Only the answer's lifetime was being asked: a fresh lookup replaces it.
            host.lookup?.cancel()
            host.lookup = nil
            host.isAskingLifetime = false
        }
        if host.lookup != nil {
            host.lookupAgain = true
            return
        }
        host.lookup = resolver.lookup(host.name, owner: host.owner) {
            [unowned self, unowned target, unowned host] result in
            host.lookup = nil
            let previous = host.resolution
            host.resolution = WatchedHost.Resolution(result)
            self.apply(self.state(of: target), to: target)
            if host.lookupAgain {
                // Whoever waits for a fresh answer waits for the next lookup.
                host.lookupAgain = false
                self.resolve(target, afresh: false)
                return
            }
            self.retryIfTemporary(result, target: target, host: host)
            if let addresses = Self.answerWithLifetime(result) {
                if host.ttl > 0, previous == host.resolution {
                    // The same answer (a network change asked again): the lifetime it had.
                    self.oweLookup(target, ttl: host.ttl)
                } else {
                    self.askLifetime(of: target, host: host, addresses: addresses)
                }
            } else {
                host.ttl = 0
            }
            self.sink?.lookupFinished(target)
        }
    }

    /// The addresses whose lifetime a lookup's answer is asked: the addresses found, or none
    /// for a name not found (its negative answer's lifetime); `nil` for a temporary failure
    /// (`retryIfTemporary` follows it) or an empty answer.
    private static func answerWithLifetime(_ result: Result<[IPAddress], ResolveError>) -> [IPAddress]? {
        switch result {
        case .success(let addresses): addresses.isEmpty ? nil : addresses
        case .failure(let error): error.isTemporary ? nil : []
        }
    }

    /// Asks how long `addresses`, the name's answer, live, and owes the name a lookup
    /// then (`NameLifetime.delay`); nothing when they have no lifetime (`/etc/hosts`) or
    /// one the refresh interval ends first.
    private func askLifetime(of target: WatchedTarget, host: WatchedHost, addresses: [IPAddress]) {
        let lookup = resolver.lifetime(of: host.name, addresses: addresses, owner: host.owner) {
            [unowned self, unowned target, unowned host] ttl in
            host.lookup = nil
            host.isAskingLifetime = false
            host.ttl = ttl ?? 0
            if let ttl { self.oweLookup(target, ttl: ttl) }
        }
        guard let lookup else { return }
        host.lookup = lookup
        host.isAskingLifetime = true
    }

    /// Owes `target` a lookup when an answer of `ttl` seconds runs out (`NameLifetime.delay`).
    private func oweLookup(_ target: WatchedTarget, ttl: UInt32) {
        guard let delay = NameLifetime.delay(ttl: ttl, refreshInterval: refreshInterval,
                                             spread: Double.random(in: 0..<1)) else { return }
        schedule.owe(target, at: MonotonicClock.microseconds() + delay)
    }

    /// A temporary failure is asked again on its own, after waits that grow, then every 30 s
    /// (`LookupSchedule`); an answer — addresses, or that the name does not exist — ends the series.
    private func retryIfTemporary(_ result: Result<[IPAddress], ResolveError>, target: WatchedTarget,
                                  host: WatchedHost) {
        guard case .failure(let error) = result, error.isTemporary else {
            host.temporaryFailures = 0
            return
        }
        if host.temporaryFailures < .max { host.temporaryFailures += 1 }
        schedule.owe(target, failures: Int(host.temporaryFailures))
    }

    /// Resolves `host` once, without a target, in `owner`'s turn, and gives its state.
    @discardableResult
    public func evaluate(host: String, owner: UserID = getuid(), completion: @escaping (TargetState) -> Void)
        -> any NameLookup
    {
        resolver.lookup(host, owner: owner) { [unowned self] result in
            completion(self.state(of: WatchedHost.Resolution(result), uid: owner))
        }
    }

    /// Keeps the periodic re-resolution running exactly while host targets exist.
    public func hostTargetsChanged(count: Int) {
        if count == 0 {
            refreshTimer = nil
        } else if refreshTimer == nil {
            refreshTimer = Sources.every(seconds: refreshInterval) { [unowned self] in
                for target in self.sink?.evaluatedTargets ?? [] { self.resolve(target, afresh: false) }
                return true
            }
        }
    }
}
