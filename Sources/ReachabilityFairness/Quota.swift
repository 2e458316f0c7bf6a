import ReachabilityCore

/// A count of something held (lookups in flight, say) with a limit per user and
/// a limit for everybody together. `perUser` is kept below `total`, so one user
/// can never take all of it: there is always room for the others.
public struct Quota: Sendable, Equatable {
    public let perUser: Int
    public let total: Int
    private var used: [UserID: Int] = [:]
    public private(set) var inUse = 0

    public init(perUser: Int, total: Int) {
        precondition(perUser > 0 && total > 0, "quota limits must be positive")
        self.perUser = min(perUser, total)
        self.total = total
    }

    /// How many `user` holds.
    public func used(by user: UserID) -> Int { used[user] ?? 0 }

    /// Whether `user` may take one more.
    public func allows(_ user: UserID) -> Bool { used(by: user) < perUser && inUse < total }

    /// Takes one for `user`; `false` (and nothing taken) when a limit is reached.
    public mutating func take(_ user: UserID) -> Bool {
        guard allows(user) else { return false }
        used[user, default: 0] += 1
        inUse += 1
        return true
    }

    /// Gives back one that `user` took.
    public mutating func give(_ user: UserID) {
        guard let n = used[user] else { return }
        used[user] = n > 1 ? n - 1 : nil
        inUse -= 1
    }
}

/// A token bucket per user: `burst` calls at once, then `perSecond` a second.
/// Driven by the caller's clock (monotonic microseconds), so it needs no timer,
/// and a user whose bucket is full again is forgotten.
public struct RateLimiter: Sendable {
    public let burst: Double
    public let perSecond: Double
    private var buckets: [UserID: (tokens: Double, at: UInt64)] = [:]

    public init(burst: Int, perSecond: Double) {
        precondition(burst > 0 && perSecond > 0, "rate limits must be positive")
        self.burst = Double(burst)
        self.perSecond = perSecond
    }

    /// Takes one token for `user` at `now`; `false` when its bucket is empty.
    public mutating func take(_ user: UserID, now: UInt64) -> Bool {
        var tokens = burst
        if let bucket = buckets[user] {
            let elapsed = Double(now &- bucket.at) / 1_000_000
            tokens = min(burst, bucket.tokens + max(0, elapsed) * perSecond)
        }
        guard tokens >= 1 else {
            buckets[user] = (tokens, now)
            return false
        }
        buckets[user] = (tokens - 1, now)
        // Forget users who have been quiet long enough to be full again (bounded memory).
        if buckets.count > 1024 {
            buckets = buckets.filter { Double(now &- $0.value.at) / 1_000_000 * perSecond + $0.value.tokens < burst }
        }
        return true
    }

    /// The number of users being limited now (for tests and statistics).
    public var trackedUsers: Int { buckets.count }
}

extension Dictionary {
    /// Gives back the storage of a dictionary that held many more entries than it
    /// does now (Swift keeps a dictionary's capacity when entries are removed).
    public mutating func shrinkIfSparse() {
        guard capacity > 1024, count < capacity / 4 else { return }
        self = Dictionary(uniqueKeysWithValues: self.map { ($0.key, $0.value) })
    }
}
