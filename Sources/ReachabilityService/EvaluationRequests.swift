import ReachabilityBus
import ReachabilityCore
import ReachabilityPlatform
import ReachabilityLoop

/// The bus side of evaluation: `Refresh` and `Query`, on top of the evaluator
/// the client library's in-process mode shares.
@LoopActor
final class EvaluationRequests {
    let evaluator: TargetEvaluator
    /// Unwatched-host `Query` lookups in flight, by caller.
    private var queries: [String: Int] = [:]
    static let maximumQueriesPerClient = 64
    static let maximumQueries = 1024

    init(refreshInterval: UInt32) {
        evaluator = TargetEvaluator(refreshInterval: refreshInterval)
    }

    /// `Refresh`: re-read everything; a host answers once its new lookup is done.
    func refresh(_ object: TargetObject, call: MethodCall) -> [DBusValue]? {
        evaluator.reload(everything: true)
        evaluator.apply(evaluator.state(of: object.target), to: object.target)
        evaluator.reloaded()
        guard object.target.kind == .host else { return object.refreshReply }
        object.waitingCalls.append(call)
        evaluator.resolve(object.target)
        return nil
    }

    // MARK: Query

    /// One-shot evaluation of `input` for `client`, without creating an object.
    func query(_ input: TargetInput?, watched: TargetObject?, call: MethodCall) throws(BusError) -> [DBusValue]? {
        func reply(_ state: TargetState) -> [DBusValue] {
            [.uint32(state.exportedFlags.rawValue), .int32(state.status.rawValue), state.details]
        }
        guard let input else { return reply(evaluator.internetState) }
        if let watched, watched.state.flags != nil { return reply(watched.state) }
        switch input {
        case .address(let address):
            return reply(evaluator.state(of: address))
        case .host(let name):
            let client = call.sender
            guard queries[client, default: 0] < Self.maximumQueriesPerClient,
                queries.values.reduce(0, +) < Self.maximumQueries
            else {
                throw BusError.limitsExceeded(
                    "too many host queries in flight (at most \(Self.maximumQueriesPerClient) per client, "
                        + "\(Self.maximumQueries) in all); watch the host instead, or wait for the answers")
            }
            queries[client, default: 0] += 1
            evaluator.evaluate(host: name) { [unowned self] state in
                self.queries[client, default: 1] -= 1
                if self.queries[client] == 0 { self.queries[client] = nil }
                call.reply(reply(state))
            }
            return nil
        }
    }
}
