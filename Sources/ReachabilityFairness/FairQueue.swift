import ReachabilityCore

/// Work waiting to be served, one FIFO queue per user, served round-robin: a
/// user with a thousand items queued delays another user's one item by one item.
///
/// Each item has a cost (its size in bytes, say). A user may queue at most
/// `perUserItems` items costing at most `perUserCost` together, and all users
/// together `totalItems` costing `totalCost` — except that a user with nothing
/// queued may always queue one item, whatever it costs, so that everybody keeps
/// making progress and a large call is refused by its handler, not by its size.
///
/// Enqueueing and serving are O(1) amortised; serving with a readiness test is
/// O(users with work).
public struct FairQueue<Item> {
    public struct Limits: Sendable, Equatable {
        public var perUserItems: Int
        public var perUserCost: Int
        public var totalItems: Int
        public var totalCost: Int

        public init(perUserItems: Int, perUserCost: Int, totalItems: Int, totalCost: Int) {
            precondition(perUserItems > 0 && perUserCost > 0 && totalItems > 0 && totalCost > 0,
                         "queue limits must be positive")
            self.perUserItems = perUserItems
            self.perUserCost = perUserCost
            self.totalItems = totalItems
            self.totalCost = totalCost
        }
    }

    /// Why an item was not queued.
    public enum Refusal: Error, Equatable, Sendable, CustomStringConvertible {
        /// The user's own share is used up.
        case userFull(items: Int, cost: Int)
        /// The queue as a whole is full.
        case full(items: Int, cost: Int)

        public var description: String {
            switch self {
            case .userFull(let items, let cost):
                "this user already has \(items) calls (\(cost) bytes) waiting to be served"
            case .full(let items, let cost):
                "the service already has \(items) calls (\(cost) bytes) waiting to be served"
            }
        }
    }

    private struct UserQueue {
        var items = Ring<(item: Item, cost: Int)>()
        var cost = 0
    }

    public let limits: Limits
    private var queues: [UserID: UserQueue] = [:]
    /// Users with something queued, in serving order.
    private var turns = Ring<UserID>()
    public private(set) var count = 0
    public private(set) var cost = 0

    public init(limits: Limits) { self.limits = limits }

    public var isEmpty: Bool { count == 0 }

    /// The number of items `user` has queued.
    public func count(of user: UserID) -> Int { queues[user]?.items.count ?? 0 }

    /// Why an item of `user` costing `itemCost` would be refused now (`nil`: it would be
    /// queued): the refusal `enqueue` would throw, told without an item.
    public func refusal(for user: UserID, cost itemCost: Int = 0) -> Refusal? {
        let queued = queues[user]?.items.count ?? 0
        let queuedCost = queues[user]?.cost ?? 0
        if queued > 0 {
            guard queued < limits.perUserItems, queuedCost + itemCost <= limits.perUserCost else {
                return .userFull(items: queued, cost: queuedCost)
            }
            guard count < limits.totalItems, cost + itemCost <= limits.totalCost else {
                return .full(items: count, cost: cost)
            }
            return nil
        }
        return count < limits.totalItems ? nil : .full(items: count, cost: cost)
    }

    /// Queues `item` for `user` behind the user's earlier items.
    public mutating func enqueue(_ item: Item, user: UserID, cost itemCost: Int) throws(Refusal) {
        // A user's first item is refused only when the whole queue is full by count: its cost
        // is bounded by the message size the bus allows, and it is served next.
        if let refusal = refusal(for: user, cost: itemCost) { throw refusal }
        // Counts only: a copy of the user's queue held here would make the append below copy it.
        if (queues[user]?.items.count ?? 0) == 0 { turns.append(user) }
        queues[user, default: UserQueue()].items.append((item, itemCost))
        queues[user]!.cost += itemCost
        count += 1
        cost += itemCost
    }

    /// The next item in round-robin order among the users for whom `isReady` is
    /// true; `nil` when none of them has anything queued.
    public mutating func next(where isReady: (UserID) -> Bool = { _ in true }) -> (user: UserID, item: Item)? {
        var tries = turns.count
        while tries > 0, let user = turns.popFirst() {
            tries -= 1
            guard isReady(user) else {
                turns.append(user)
                continue
            }
            var queue = queues.removeValue(forKey: user)!
            let (item, itemCost) = queue.items.popFirst()!
            queue.cost -= itemCost
            count -= 1
            cost -= itemCost
            if !queue.items.isEmpty {
                queues[user] = queue
                turns.append(user)
            }
            return (user, item)
        }
        return nil
    }
}
