import Logging
import ReachabilityBus
import ReachabilityCore
import ReachabilityFairness
import ReachabilityPlatform
import ReachabilityLoop

/// The bus side of evaluation: `Refresh` and `Query`, on top of the evaluator
/// the client library's in-process mode shares.
@LoopActor
final class EvaluationRequests {
    let evaluator: TargetEvaluator
    /// Unwatched-host `Query` lookups in flight, per user and in all.
    private var queries = Quota(perUser: ServiceLimits.standard.queriesPerUser, total: ServiceLimits.standard.queries)
    /// The lookups in flight of each caller's `Query` calls, cancelled when it leaves.
    private var queriesByClient: [String: [ObjectIdentifier: (lookup: any NameLookup, user: UserID)]] = [:]
    /// Lookups of names a caller chose (`Query` of an unwatched host, `Refresh` of a host), per user:
    /// a burst, then a rate (`ServiceLimits`).
    private var lookupsOnRequest = RateLimiter(burst: ServiceLimits.standard.lookupsOnRequestBurst,
                                               perSecond: Double(ServiceLimits.standard.lookupsOnRequestPerSecond))
    /// When `Refresh` last re-read every fact (monotonic µs).
    private var lastReload: Int64 = 0
    /// `Refresh` calls of one user that may wait for one host's lookup. The answer releases
    /// them all in one turn of the loop, ahead of any other caller's answer: a storm of them
    /// (thousands in flight) made everybody else wait for that burst.
    static let waitingRefreshesPerUser = ServiceLimits.standard.waitingRefreshesPerUser
    /// A `Refresh` within this long of the last one uses the facts that one read.
    static let refreshJoinWindow = ServiceLimits.standard.refreshJoinWindow

    /// `resolver` looks host names up (`nil`: GLib's; a test brings its own). The evaluator logs to `logger`.
    init(refreshInterval: UInt32, logger: Logger, resolver: (any NameResolver)? = nil) {
        evaluator = TargetEvaluator(refreshInterval: refreshInterval, logger: logger, resolver: resolver)
    }

    /// `Refresh`: re-read everything (at most once per `refreshJoinWindow`: the events keep the
    /// facts current, this is a repair); a host answers once its new lookup is done. A
    /// `Refresh` of a host while one is waiting for its lookup joins it (up to
    /// `waitingRefreshesPerUser` of one user); one past that, or past the caller's rate of
    /// lookups, is answered with the current state.
    func refresh(_ object: TargetObject, call: MethodCall) -> [DBusValue]? {
        let now = MonotonicClock.microseconds()
        if now - lastReload >= Self.refreshJoinWindow {
            lastReload = now
            evaluator.reload(everything: true)
            evaluator.apply(evaluator.state(of: object.target), to: object.target)
            evaluator.reloaded()
        }
        let target = object.target
        // Only a looked-up name has a fresher answer to wait for.
        guard target.host != nil else { return object.refreshReply }
        if !object.waitingCalls.isEmpty {
            guard object.waitingCalls.count(where: { $0.user == call.user }) < Self.waitingRefreshesPerUser else {
                return object.refreshReply
            }
            object.waitingCalls.append(call)
            return nil
        }
        guard lookupsOnRequest.take(call.user, now: UInt64(now)) else { return object.refreshReply }
        object.waitingCalls.append(call)
        evaluator.resolve(target)
        return nil
    }

    // MARK: Query

    /// One-shot evaluation of `input` for the caller, without creating an object.
    func query(_ input: TargetInput, watched: TargetObject?, call: MethodCall) throws(BusError) -> [DBusValue]? {
        func reply(_ state: TargetState) -> [DBusValue] {
            [.uint32(state.exportedFlags.rawValue), .int32(state.status.rawValue), state.details]
        }
        // Every answer is the caller's own: its uid in the lookups when uid rules route it otherwise.
        let user = call.user
        if let watched, watched.state.flags != nil { return reply(evaluator.state(of: watched.target, uid: user)) }
        switch input {
        case .internet:
            return reply(evaluator.internetState(uid: user))
        case .address(let address):
            return reply(evaluator.state(of: address, uid: user))
        case .pair(let local, let remote):
            return reply(evaluator.state(ofPair: local, remote, uid: user))
        case .host(let name):
            let client = call.sender
            guard queries.allows(user) else {
                throw BusError.limitsExceeded(
                    "too many host queries in flight (at most \(queries.perUser) per user, "
                        + "\(queries.total) in all); watch the host instead, or wait for the answers")
            }
            guard lookupsOnRequest.take(user, now: UInt64(MonotonicClock.microseconds())) else {
                throw BusError.limitsExceeded(
                    "too many lookups of new names (at most \(Int(lookupsOnRequest.burst)) at once, then "
                        + "\(Int(lookupsOnRequest.perSecond)) a second per user); watch the host instead, or wait")
            }
            _ = queries.take(user)
            var id: ObjectIdentifier?
            let lookup = evaluator.evaluate(host: name, owner: user) { [unowned self] state in
                self.queries.give(user)
                if let id { self.forget(id, of: client) }
                call.reply(reply(state))
            }
            id = ObjectIdentifier(lookup)
            queriesByClient[client, default: [:]][id!] = (lookup, user)
            return nil
        }
    }

    private func forget(_ id: ObjectIdentifier, of client: String) {
        queriesByClient[client]?[id] = nil
        if queriesByClient[client]?.isEmpty == true { queriesByClient[client] = nil }
    }

    /// `client` left the bus: its queries are cancelled (and their slots given back).
    func releaseAll(client: String) {
        guard let lookups = queriesByClient.removeValue(forKey: client) else { return }
        for (lookup, user) in lookups.values {
            lookup.cancel()
            queries.give(user)
        }
    }
}
