import Glibc
import ReachabilityCore
import ReachabilityLoop

/// Host names, looked up through the evaluator's `NameResolver`: on every network
/// change, on demand (`Refresh`, a new target), and every `refreshInterval` seconds
/// while host targets exist.
extension TargetEvaluator {
    /// Looks `target`'s name up (again) when it is looked up at all; a lookup in flight is
    /// followed by one more. Its answer is applied at once (`apply`), and the sink hears
    /// `lookupSettled` once no other lookup follows.
    public func resolve(_ target: WatchedTarget) {
        guard let host = target.host else { return }
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
                self.resolve(target)
                return
            }
            self.sink?.lookupSettled(target)
        }
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
                for target in self.sink?.evaluatedTargets ?? [] { self.resolve(target) }
                return true
            }
        }
    }
}
