import Glibc
import ReachabilityCore
import ReachabilityLoop

/// Host names, looked up through the evaluator's `NameResolver`: on every network
/// change, on demand (`Refresh`, a new target), every `refreshInterval` seconds
/// while host targets exist, and again shortly after a temporary failure (`LookupRetries`).
extension TargetEvaluator {
    /// Looks `target`'s name up (again) when it is looked up at all; a lookup in flight is
    /// followed by one more. Its answer is applied at once (`apply`), and the sink hears
    /// `lookupSettled` once no other lookup follows. A new reason to look up (a network
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
        retries.forget(host)
        if afresh { host.temporaryFailures = 0 }
        if host.lookup != nil {
            host.lookupAgain = true
            return
        }
        host.lookup = resolver.lookup(host.name, owner: host.owner) {
            [unowned self, unowned target, unowned host] result in
            host.lookup = nil
            host.resolution = WatchedHost.Resolution(result)
            self.apply(self.state(of: target), to: target)
            if host.lookupAgain {
                // Whoever waits for a fresh answer waits for the next lookup.
                host.lookupAgain = false
                self.resolve(target, afresh: false)
                return
            }
            self.retryIfTemporary(result, target: target, host: host)
            self.sink?.lookupSettled(target)
        }
    }

    /// A temporary failure is asked again on its own, after waits that grow, a few times
    /// (`LookupRetries`); an answer — addresses, or that the name does not exist — ends the series.
    private func retryIfTemporary(_ result: Result<[IPAddress], ResolveError>, target: WatchedTarget,
                                  host: WatchedHost) {
        guard case .failure(let error) = result, error.isTemporary else {
            host.temporaryFailures = 0
            return
        }
        if host.temporaryFailures < .max { host.temporaryFailures += 1 }
        _ = retries.owe(target, failures: Int(host.temporaryFailures))
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
