import ReachabilityCore

/// Why a hold or a release was refused. Mapped to the D-Bus errors
/// `…Error.TooManyTargets` and `…Error.UnknownTarget`.
public enum HoldError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A per-client, per-user or the global limit on watched targets would be exceeded.
    case tooManyTargets(String)
    /// The client does not hold the target it tried to release.
    case unknownTarget(String)

    /// The message for the D-Bus error.
    public var message: String {
        switch self {
        case .tooManyTargets(let m), .unknownTarget(let m): m
        }
    }

    public var description: String { message }
}

/// Which bus clients (by unique name) hold which targets, with a per-client, a
/// per-user and a global limit (defaults 256, 2048 and 16384). The per-user limit
/// is what keeps room for everybody: one user may open many connections, and
/// counts distinct targets across all of them; it is kept below the global one.
///
/// Indexed every way, so holding, releasing, dropping a vanished client and
/// asking whether a user holds a target cost a few dictionary operations per
/// target involved, whatever the number of targets.
public struct HolderRegistry<Key: Hashable & Sendable>: Sendable {
    /// The most targets one client may hold at once.
    public let perClientLimit: Int
    /// The most distinct targets the clients of one user may hold at once.
    public let perUserLimit: Int
    /// The most distinct targets held by anybody at once.
    public let globalLimit: Int

    private var holdersByKey: [Key: HolderSet] = [:]
    private var keysByClient: [String: Set<Key>] = [:]
    private var userOfClient: [String: UserID] = [:]
    /// For each user, the keys its clients hold and how many of its clients hold each.
    private var keysByUser: [UserID: [Key: Int]] = [:]

    public init(perClientLimit: Int = 256, perUserLimit: Int = 2048, globalLimit: Int = 16384) {
        precondition(perClientLimit >= 0 && perUserLimit >= 0 && globalLimit >= 0, "limits must not be negative")
        self.perClientLimit = perClientLimit
        self.perUserLimit = min(perUserLimit, globalLimit)
        self.globalLimit = globalLimit
    }

    /// `client`, a connection of `user`, starts holding `key`. Idempotent per
    /// client: holding again changes nothing and returns `false`.
    ///
    /// - Returns: `true` when `client` is the first holder of `key` (the caller
    ///   creates the target's object).
    /// - Throws: `.tooManyTargets` when `client` already holds `perClientLimit`
    ///   targets, `key` is new to `user` and its clients hold `perUserLimit`, or
    ///   `key` is new and `globalLimit` distinct targets are held.
    public mutating func hold(_ key: Key, client: String, user: UserID) throws(HoldError) -> Bool {
        // Counts and flags only: a copy of a set held here would make the inserts below copy it
        // (copy on write), one whole set per hold.
        if keysByClient[client]?.contains(key) == true { return false }
        let heldByClient = keysByClient[client]?.count ?? 0
        if heldByClient >= perClientLimit {
            throw .tooManyTargets(
                "client \(InvalidTarget.quoted(client)) already holds \(targetCount(heldByClient)); "
                    + "the per-client limit is \(perClientLimit)")
        }
        let heldByUser = keysByUser[user]?.count ?? 0
        if keysByUser[user]?[key] == nil && heldByUser >= perUserLimit {
            throw .tooManyTargets(
                "user \(user) already holds \(targetCount(heldByUser)) through its connections; "
                    + "the per-user limit is \(perUserLimit)")
        }
        let isNew = holdersByKey[key] == nil
        if isNew && holdersByKey.count >= globalLimit {
            throw .tooManyTargets(
                "the daemon already watches \(targetCount(holdersByKey.count)); the global limit is \(globalLimit)")
        }
        keysByClient[client, default: []].insert(key)
        if holdersByKey[key] == nil {
            holdersByKey[key] = .one(client)
        } else {
            holdersByKey[key]!.insert(client)
        }
        userOfClient[client] = user
        keysByUser[user, default: [:]][key, default: 0] += 1
        return isNew
    }

    /// `client` stops holding `key`.
    ///
    /// - Returns: `true` when no holder of `key` remains (the caller removes
    ///   the target's object).
    /// - Throws: `.unknownTarget` when `client` does not hold `key`.
    public mutating func release(_ key: Key, client: String) throws(HoldError) -> Bool {
        guard keysByClient[client]?.remove(key) != nil else {
            throw .unknownTarget("client \(InvalidTarget.quoted(client)) does not hold this target")
        }
        if keysByClient[client]?.isEmpty == true { keysByClient[client] = nil }
        let isLast = dropHolder(client, of: key)
        if keysByClient[client] == nil { userOfClient[client] = nil }
        return isLast
    }

    /// Drops everything `client` holds (it left the bus).
    ///
    /// - Returns: the keys that lost their last holder, in no particular order.
    public mutating func releaseAll(client: String) -> [Key] {
        guard let keys = keysByClient.removeValue(forKey: client) else { return [] }
        var orphaned: [Key] = []
        for key in keys where dropHolder(client, of: key) {
            orphaned.append(key)
        }
        userOfClient[client] = nil
        return orphaned
    }

    /// Gives back the storage left by many releases (after a client with many targets left).
    public mutating func compact() {
        holdersByKey.shrinkIfSparse()
        keysByClient.shrinkIfSparse()
        userOfClient.shrinkIfSparse()
        for user in keysByUser.keys { keysByUser[user]!.shrinkIfSparse() }
        keysByUser.shrinkIfSparse()
    }

    /// Whether a client of `user` holds `key`.
    public func isHeld(_ key: Key, byUser user: UserID) -> Bool { keysByUser[user]?[key] != nil }

    /// The user of `client`, while it holds something.
    public func user(of client: String) -> UserID? { userOfClient[client] }

    /// The keys the clients of `user` hold.
    public func keys(ofUser user: UserID) -> Dictionary<Key, Int>.Keys { (keysByUser[user] ?? [:]).keys }

    /// The number of distinct keys the clients of `user` hold.
    public func count(ofUser user: UserID) -> Int { keysByUser[user]?.count ?? 0 }

    /// The clients holding `key`; empty when nobody does.
    public func holders(of key: Key) -> Set<String> {
        holdersByKey[key]?.set ?? []
    }

    /// The same as a list (what signals are sent to), made without a set.
    public func holderList(of key: Key) -> [String] {
        holdersByKey[key]?.list ?? []
    }

    /// The clients holding `key`, grouped by their user (what each listener's own view needs).
    public func holdersByUser(of key: Key) -> [UserID: [String]] {
        Dictionary(grouping: holderList(of: key), by: { user(of: $0) ?? 0 })
    }

    /// Whether `client` holds `key`.
    public func isHolder(_ client: String, of key: Key) -> Bool {
        holdersByKey[key]?.contains(client) ?? false
    }

    /// The keys `client` holds; empty when it holds none.
    public func targets(of client: String) -> Set<Key> {
        keysByClient[client] ?? []
    }

    /// Whether anybody holds `key`.
    public func contains(_ key: Key) -> Bool {
        holdersByKey[key] != nil
    }

    /// The number of distinct keys held.
    public var count: Int { holdersByKey.count }

    /// The clients holding at least one key.
    public var clients: Dictionary<String, Set<Key>>.Keys { keysByClient.keys }

    private func targetCount(_ n: Int) -> String {
        n == 1 ? "1 target" : "\(n) targets"
    }

    /// Removes `client` from the holders of `key`; `true` when none remains.
    private mutating func dropHolder(_ client: String, of key: Key) -> Bool {
        if let user = userOfClient[client], let n = keysByUser[user]?[key] {
            keysByUser[user]![key] = n > 1 ? n - 1 : nil
            if keysByUser[user]!.isEmpty { keysByUser[user] = nil }
        }
        guard holdersByKey[key]?.remove(client) ?? true else { return false }
        holdersByKey[key] = nil
        return true
    }
}

/// The clients holding one key. Nearly every key has one holder, kept without a set of its
/// own (a set per key was a hundred bytes per target, for thousands of targets).
private enum HolderSet {
    case one(String)
    case many(Set<String>)

    func contains(_ client: String) -> Bool {
        switch self {
        case .one(let only): only == client
        case .many(let clients): clients.contains(client)
        }
    }

    mutating func insert(_ client: String) {
        switch self {
        case .one(let only) where only != client: self = .many([only, client])
        case .one: break
        case .many(var clients):
            self = .one(client)  // drops the reference, so the set is not copied on insert
            clients.insert(client)
            self = .many(clients)
        }
    }

    /// Removes `client`; `true` when nobody is left.
    mutating func remove(_ client: String) -> Bool {
        switch self {
        case .one(let only): return only == client
        case .many(var clients):
            self = .one(client)
            clients.remove(client)
            if clients.count == 1 { self = .one(clients.first!) } else { self = .many(clients) }
            return clients.isEmpty
        }
    }

    var set: Set<String> {
        switch self {
        case .one(let only): [only]
        case .many(let clients): clients
        }
    }

    var list: [String] {
        switch self {
        case .one(let only): [only]
        case .many(let clients): Array(clients)
        }
    }
}
