/// Which bus clients (unique names) hold which targets, with limits.
public struct HolderRegistry<Key: Hashable & Sendable>: Sendable {
    public enum HoldError: Error, Hashable, Sendable {
        case tooManyTargets(String)
        case unknownTarget(String)

        public var message: String {
            switch self {
            case .tooManyTargets(let m), .unknownTarget(let m): m
            }
        }
    }

    public let perClientLimit: Int
    public let globalLimit: Int
    private var holdersByKey: [Key: Set<String>] = [:]
    private var keysByClient: [String: Set<Key>] = [:]

    public init(perClientLimit: Int = 256, globalLimit: Int = 16384) {
        self.perClientLimit = perClientLimit
        self.globalLimit = globalLimit
    }

    /// The number of distinct held targets.
    public var count: Int { holdersByKey.count }

    public func holders(of key: Key) -> Set<String> { holdersByKey[key] ?? [] }
    public func targets(of client: String) -> Set<Key> { keysByClient[client] ?? [] }

    /// Makes `client` a holder of `key`. Idempotent per client. Returns true when
    /// `key` had no holder before (the caller creates its object).
    public mutating func hold(_ key: Key, client: String) throws(HoldError) -> Bool {
        if keysByClient[client]?.contains(key) == true { return false }
        if (keysByClient[client]?.count ?? 0) >= perClientLimit {
            throw .tooManyTargets("this client already watches \(perClientLimit) targets, the most one client may; "
                                  + "release some first")
        }
        let isNew = holdersByKey[key] == nil
        if isNew && holdersByKey.count >= globalLimit {
            throw .tooManyTargets("the service already watches \(globalLimit) targets, the most it may")
        }
        holdersByKey[key, default: []].insert(client)
        keysByClient[client, default: []].insert(key)
        return isNew
    }

    /// `client` stops holding `key`. Returns true when no holder remains.
    public mutating func release(_ key: Key, client: String) throws(HoldError) -> Bool {
        guard keysByClient[client]?.remove(key) != nil else {
            throw .unknownTarget("the client does not hold this target")
        }
        if keysByClient[client]?.isEmpty == true { keysByClient[client] = nil }
        holdersByKey[key]?.remove(client)
        if holdersByKey[key]?.isEmpty == true {
            holdersByKey[key] = nil
            return true
        }
        return false
    }

    /// Releases everything `client` holds; returns the keys left without a holder.
    public mutating func releaseAll(client: String) -> [Key] {
        guard let keys = keysByClient.removeValue(forKey: client) else { return [] }
        var orphaned: [Key] = []
        for key in keys {
            holdersByKey[key]?.remove(client)
            if holdersByKey[key]?.isEmpty == true {
                holdersByKey[key] = nil
                orphaned.append(key)
            }
        }
        return orphaned
    }
}
