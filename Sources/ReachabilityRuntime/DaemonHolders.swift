import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop

/// Who holds the daemon's targets (`Manager.ListHolders`), for tools: every connection
/// for root, the caller's own user's otherwise.
package enum DaemonHolders {
    package static func list(timeoutMilliseconds: Int32 = 15_000) async throws(ReachabilityError)
        -> [ReachabilityHolder]
    {
        let result: Result<[ReachabilityHolder], ReachabilityError> = await Runtime.answer { runtime, done in
            do throws(ReachabilityError) {
                let connection = try MetricsFollower.connect(logger: runtime.logger)
                let reply = Result { () throws(BusError) in
                    try connection.call(destination: ServiceNames.busName, path: MetricsFollower.root,
                                        interface: ServiceNames.managerInterface,
                                        member: Contract.Manager.listHolders.name,
                                        timeoutMilliseconds: timeoutMilliseconds)
                }
                done(reply.mapError(ReachabilityError.init).flatMap(Self.holders))
            } catch {
                done(.failure(error))
            }
        }
        return try result.get()
    }

    static func holders(_ values: [DBusValue]) -> Result<[ReachabilityHolder], ReachabilityError> {
        guard case .array(_, let rows)? = values.first else {
            return .failure(.failed("Manager.ListHolders answered '\(values.signature)', not a(osu)"))
        }
        return .success(rows.compactMap { row in
            guard case .structure(let fields) = row, fields.count == 3, case .objectPath(let path) = fields[0],
                case .string(let client) = fields[1], case .uint32(let user) = fields[2]
            else { return nil }
            return ReachabilityHolder(object: path.rawValue, client: client, user: user)
        })
    }
}

/// A connection holding one of the daemon's targets.
public struct ReachabilityHolder: Sendable, Hashable {
    /// The target's object path.
    public let object: String
    /// The connection's unique bus name (":1.42").
    public let client: String
    /// The connection's Unix user.
    public let user: UInt32

    /// The target as `list` shows it: the last element of its path, unescaped.
    public var targetName: String {
        let label = object.split(separator: "/").last.map(String.init) ?? object
        return PathEscaping.unescapeLabel(label) ?? label
    }
}
