import ReachabilityCore
import ReachabilityLoop
import ReachabilityPlatform

/// Name lookups that answer when the test says (`answer`), never by themselves: the
/// test sees every lookup asked, for which user, and whether it was cancelled.
@LoopActor
public final class ScriptedResolver: NameResolver {
    public init() {}

    public final class Lookup: NameLookup {
        public let host: String
        public let owner: UserID
        fileprivate var completion: ((Result<[IPAddress], ResolveError>) -> Void)?
        public private(set) var isCancelled = false

        init(host: String, owner: UserID, completion: @escaping (Result<[IPAddress], ResolveError>) -> Void) {
            self.host = host
            self.owner = owner
            self.completion = completion
        }

        public func cancel() {
            isCancelled = true
            completion = nil
        }

        public var isPending: Bool { completion != nil }
    }

    /// Every lookup asked, in order.
    public private(set) var lookups: [Lookup] = []

    /// The lookups waiting for an answer.
    public var pending: [Lookup] { lookups.filter(\.isPending) }

    /// Told of every lookup asked, as it is asked.
    public var onLookup: ((Lookup) -> Void)?

    public func lookup(_ host: String, owner: UserID, completion: @escaping (Result<[IPAddress], ResolveError>) -> Void)
        -> any NameLookup
    {
        let lookup = Lookup(host: host, owner: owner, completion: completion)
        lookups.append(lookup)
        onLookup?(lookup)
        return lookup
    }

    /// A lifetime query (`NameResolver.lifetime`), answered when the test says.
    public final class LifetimeQuery: NameLookup {
        public let host: String
        public let addresses: [IPAddress]
        fileprivate var completion: ((UInt32?) -> Void)?
        public private(set) var isCancelled = false

        init(host: String, addresses: [IPAddress], completion: @escaping (UInt32?) -> Void) {
            self.host = host
            self.addresses = addresses
            self.completion = completion
        }

        public func cancel() {
            isCancelled = true
            completion = nil
        }

        public var isPending: Bool { completion != nil }
    }

    /// Whether lifetimes are asked of it at all (off: as a resolver that knows none).
    public var knowsLifetimes = false
    /// Every lifetime query asked, in order.
    public private(set) var lifetimeQueries: [LifetimeQuery] = []

    public func lifetime(of host: String, addresses: [IPAddress], owner: UserID,
                         completion: @escaping (UInt32?) -> Void) -> (any NameLookup)? {
        guard knowsLifetimes else { return nil }
        let query = LifetimeQuery(host: host, addresses: addresses, completion: completion)
        lifetimeQueries.append(query)
        return query
    }

    /// Answers the oldest pending lifetime query of `host` with `ttl` (`nil`: no DNS answer).
    @discardableResult
    public func answerLifetime(_ host: String, _ ttl: UInt32?) -> Bool {
        guard let query = lifetimeQueries.first(where: { $0.host == host && $0.isPending }),
              let completion = query.completion else { return false }
        query.completion = nil
        completion(ttl)
        return true
    }

    /// Answers the oldest pending lookup of `host` with `addresses`; false when none waits.
    @discardableResult
    public func answer(_ host: String, _ addresses: [String]) -> Bool {
        answer(host, .success(addresses.map { try! IPAddress(parsing: $0) }))
    }

    /// Answers the oldest pending lookup of `host` with the resolver's error `message`: the
    /// name does not exist, or (`temporary`) no server answered for now.
    @discardableResult
    public func fail(_ host: String, _ message: String, temporary: Bool = false) -> Bool {
        answer(host, .failure(ResolveError(message: message, isTemporary: temporary)))
    }

    private func answer(_ host: String, _ result: Result<[IPAddress], ResolveError>) -> Bool {
        guard let lookup = pending.first(where: { $0.host == host }), let completion = lookup.completion else {
            return false
        }
        lookup.completion = nil
        completion(result)
        return true
    }
}
