import Testing
import ReachabilityCore
@testable import ReachabilityFairness

@Suite("Fairness between users: queues, quotas, rates, unread output")
struct FairnessTests {
    static let roomy = FairQueue<Int>.Limits(perUserItems: 1000, perUserCost: 1_000_000, totalItems: 10_000,
                                             totalCost: 10_000_000)

    @Test("a user with a thousand calls queued delays another user's one call by one call")
    func roundRobin() throws {
        var queue = FairQueue<Int>(limits: Self.roomy)
        for i in 0..<1000 { try queue.enqueue(i, user: 65534, cost: 100) }
        try queue.enqueue(-1, user: 4242, cost: 100)
        let first = queue.next()
        let second = queue.next()
        #expect(first?.user == 65534 && first?.item == 0)
        #expect(second?.user == 4242 && second?.item == -1, "the victim's call is second, not 1001st")
        // The rest keep their order.
        var order: [Int] = []
        while let (_, item) = queue.next() { order.append(item) }
        #expect(order == Array(1..<1000))
        #expect(queue.isEmpty && queue.cost == 0)
    }

    @Test("three users alternate, each in its own order")
    func alternation() throws {
        var queue = FairQueue<String>(limits: .init(perUserItems: 10, perUserCost: 100, totalItems: 100,
                                                    totalCost: 1000))
        for user: UserID in [1, 2, 3] {
            for n in 0..<3 { try queue.enqueue("\(user).\(n)", user: user, cost: 1) }
        }
        var served: [String] = []
        while let (_, item) = queue.next() { served.append(item) }
        #expect(served == ["1.0", "2.0", "3.0", "1.1", "2.1", "3.1", "1.2", "2.2", "3.2"])
    }

    @Test("a user's share is bounded by count and by cost; its first item is always taken")
    func perUserLimits() throws {
        var queue = FairQueue<Int>(limits: .init(perUserItems: 3, perUserCost: 1000, totalItems: 100,
                                                 totalCost: 100_000))
        // A first item larger than the user's share is taken: it is served next.
        try queue.enqueue(0, user: 1, cost: 5000)
        #expect(throws: FairQueue<Int>.Refusal.userFull(items: 1, cost: 5000)) {
            try queue.enqueue(1, user: 1, cost: 1)
        }
        _ = queue.next()
        for i in 0..<3 { try queue.enqueue(i, user: 1, cost: 10) }
        #expect(throws: FairQueue<Int>.Refusal.userFull(items: 3, cost: 30)) { try queue.enqueue(9, user: 1, cost: 10) }
        // The same verdict is told without an item (a call refused before it is decoded).
        #expect(queue.refusal(for: 1) == .userFull(items: 3, cost: 30))
        #expect(queue.refusal(for: 2) == nil)
        // Another user still has room.
        try queue.enqueue(7, user: 2, cost: 10)
        #expect(queue.count(of: 2) == 1)
        #expect(queue.refusal(for: 2, cost: 991) == .userFull(items: 1, cost: 10))
        #expect(queue.refusal(for: 2, cost: 990) == nil)
    }

    @Test("the whole queue is bounded, so no number of users can grow it without end")
    func totalLimits() throws {
        var queue = FairQueue<Int>(limits: .init(perUserItems: 10, perUserCost: 1000, totalItems: 4,
                                                 totalCost: 1000))
        for user: UserID in 1...4 { try queue.enqueue(0, user: user, cost: 1) }
        #expect(throws: FairQueue<Int>.Refusal.full(items: 4, cost: 4)) { try queue.enqueue(0, user: 5, cost: 1) }
        #expect(throws: FairQueue<Int>.Refusal.full(items: 4, cost: 4)) { try queue.enqueue(0, user: 1, cost: 1) }
    }

    @Test("users that are not ready are passed over, and keep their turn")
    func readiness() throws {
        var queue = FairQueue<Int>(limits: Self.roomy)
        try queue.enqueue(1, user: 1, cost: 1)
        try queue.enqueue(2, user: 2, cost: 1)
        let first = queue.next(where: { $0 != 1 })
        let none = queue.next(where: { $0 != 1 })
        #expect(first?.item == 2)
        #expect(none == nil, "user 1 waits")
        #expect(queue.count == 1)
        let last = queue.next()
        #expect(last?.item == 1)
    }

    @Test("serving and queueing stay cheap with many items (no O(n) step per item)")
    func linear() throws {
        var queue = FairQueue<Int>(limits: .init(perUserItems: 200_000, perUserCost: 200_000, totalItems: 400_000,
                                                 totalCost: 400_000))
        for i in 0..<200_000 { try queue.enqueue(i, user: UserID(i % 2), cost: 1) }
        var n = 0
        while queue.next() != nil { n += 1 }
        #expect(n == 200_000)
    }

    @Test("a quota keeps room for others: one user never takes the whole of it")
    func quota() {
        var quota = Quota(perUser: 4, total: 8)
        for _ in 0..<4 {
            let result = quota.take(65534)
            #expect(result)
        }
        do {
            let result = quota.take(65534)
            #expect(!result, "the attacker's share is used up")
        }
        do {
            let result = quota.take(4242)
            #expect(result, "the victim still has room")
        }
        quota.give(65534)
        #expect(quota.used(by: 65534) == 3 && quota.inUse == 4)
        quota.give(99)  // never took any: nothing changes
        #expect(quota.inUse == 4)
        #expect(Quota(perUser: 10, total: 3).perUser == 3)
    }

    @Test("a rate limiter lets a burst through, then refills at its rate, per user")
    func rate() {
        var limiter = RateLimiter(burst: 4, perSecond: 2)
        for _ in 0..<4 {
            let result = limiter.take(1, now: 1_000_000)
            #expect(result)
        }
        do {
            let result = limiter.take(1, now: 1_000_000)
            #expect(!result)
        }
        do {
            let result = limiter.take(2, now: 1_000_000)
            #expect(result, "another user has its own bucket")
        }
        do {
            let result = limiter.take(1, now: 1_400_000)
            #expect(!result, "0.4 s gives 0.8 of a token")
        }
        do {
            let result = limiter.take(1, now: 1_500_000)
            #expect(result, "0.5 s gives one")
        }
        do {
            let result = limiter.take(1, now: 1_500_000)
            #expect(!result)
        }
        // Quiet users are forgotten once many users have been seen.
        for user: UserID in 100..<1200 { _ = limiter.take(user, now: 2_000_000) }
        _ = limiter.take(5000, now: 100_000_000)
        #expect(limiter.trackedUsers < 100)
    }

    @Test("unread output: a receipt is asked for every so many bytes, and its answer clears them")
    func receipts() {
        var ledger = OutputLedger(receiptAfter: 100, perUser: 300)
        var ask = ledger.sent(60, to: ":1.1", user: 1)
        #expect(ask.isEmpty)
        ask = ledger.sent(60, to: ":1.1", user: 1)
        #expect(ask == [":1.1"], "120 bytes unread: ask")
        ask = ledger.sent(60, to: ":1.1", user: 1)
        #expect(ask.isEmpty, "one receipt at a time")
        #expect(ledger.unread(by: 1) == 180 && ledger.owesReceipt(":1.1"))
        let again = ledger.receiptArrived(from: ":1.1")
        #expect(!again, "60 left: below the threshold")
        #expect(ledger.unread(by: 1) == 60 && !ledger.owesReceipt(":1.1"))
        let none = ledger.receiptArrived(from: ":1.1")
        #expect(!none && ledger.unread(by: 1) == 60, "no receipt outstanding: nothing changes")
    }

    @Test("a peer owing a receipt with more than its user's share unread is sent no more signals, until it answers")
    func saturated() {
        var ledger = OutputLedger(receiptAfter: 100, perUser: 300)
        _ = ledger.sent(120, to: ":1.1", user: 1)
        #expect(ledger.owesReceipt(":1.1") && !ledger.isSaturated(":1.1"))
        _ = ledger.sent(200, to: ":1.1", user: 1)
        #expect(ledger.isSaturated(":1.1"), "320 unread, the receipt still owed")
        #expect(!ledger.isSaturated(":1.2"), "another peer")
        _ = ledger.receiptArrived(from: ":1.1")
        #expect(!ledger.isSaturated(":1.1"), "it read: signals go again")
    }

    @Test("a user blocked by many connections with a little each asks every one of them for a receipt")
    func manySmallPeers() {
        var ledger = OutputLedger(receiptAfter: 100, perUser: 300)
        for n in 1...5 {
            let ask = ledger.sent(60, to: ":1.\(n)", user: 9)
            #expect(ask.isEmpty, "60 bytes each: no receipt yet, and 300 in all is not over the share")
        }
        #expect(!ledger.isBlocked(9))
        let ask = ledger.sent(60, to: ":1.6", user: 9)
        #expect(Set(ask) == Set((1...6).map { ":1.\($0)" }), "blocked: everybody with anything unread is asked")
        #expect(ledger.isBlocked(9))
        for n in 1...6 { _ = ledger.receiptArrived(from: ":1.\(n)") }
        #expect(!ledger.isBlocked(9) && ledger.unread(by: 9) == 0)
    }

    @Test("a peer is stalled only once its receipt is overdue; leaving clears everything")
    func blocking() {
        var ledger = OutputLedger(receiptAfter: 100, perUser: 300, forgivenessAfter: 1_000)
        _ = ledger.sent(150, to: ":1.1", user: 65534)
        _ = ledger.sent(2000, to: ":1.1", user: 65534)  // a large reply, not read yet
        #expect(ledger.isBlocked(65534) && !ledger.isStalled(":1.1"), "a large reply is not a sign of not reading")
        #expect(!ledger.isBlocked(4242))
        // Its receipt times out: the first is forgiven; the next one that times out is overdue.
        var again = ledger.receiptLost(from: ":1.1", now: 0)
        #expect(!again && !ledger.isBlocked(65534))
        _ = ledger.sent(400, to: ":1.1", user: 65534)
        again = ledger.receiptLost(from: ":1.1", now: 10)
        #expect(again && ledger.isStalled(":1.1"))
        _ = ledger.sent(10, to: ":1.2", user: 65534)
        #expect(!ledger.isStalled(":1.2"), "another connection of the user is not stalled with it")
        let unknown = ledger.receiptLost(from: ":9.9", now: 0)
        #expect(!unknown)
        #expect(ledger.forget(":1.1") == 400)
        #expect(!ledger.isBlocked(65534) && !ledger.isStalled(":1.1"))
        #expect(ledger.unread(by: 65534) == 10 && ledger.totalUnread == 10)
    }

    @Test("a receipt answered while more was sent asks again for the rest")
    func receiptChain() {
        var ledger = OutputLedger(receiptAfter: 100, perUser: 1000)
        #expect(ledger.sent(100, to: ":1.1", user: 1) == [":1.1"])
        _ = ledger.sent(250, to: ":1.1", user: 1)
        let again = ledger.receiptArrived(from: ":1.1")
        #expect(again, "250 unread after the receipt: ask again")
        #expect(ledger.unread(by: 1) == 250)
        let done = ledger.receiptArrived(from: ":1.1")
        #expect(!done && ledger.unread(by: 1) == 0 && ledger.totalUnread == 0)
    }

    @Test("receipts have ids: a late answer, or a late timeout, of an earlier receipt counts for nothing")
    func receiptIDs() {
        var ledger = OutputLedger(receiptAfter: 100, perUser: 1000, forgivenessAfter: 10)
        _ = ledger.sent(100, to: ":1.1", user: 1)
        let first = ledger.receipt(of: ":1.1")!
        // The bus vouches for it (its queue for the peer is empty): as good as the answer.
        let askAgain = ledger.busQueueEmpty(for: ":1.1", receipt: first)
        #expect(!askAgain)
        #expect(ledger.receipt(of: ":1.1") == nil && ledger.unread(by: 1) == 0)
        _ = ledger.sent(150, to: ":1.1", user: 1)
        let second = ledger.receipt(of: ":1.1")!
        #expect(second != first)
        // The first Ping's answer arrives now: it says nothing of what was sent since.
        let late = ledger.receiptArrived(from: ":1.1", receipt: first)
        #expect(!late)
        #expect(ledger.unread(by: 1) == 150 && ledger.receipt(of: ":1.1") == second)
        // Nor does its timeout.
        let lateTimeout = ledger.receiptLost(from: ":1.1", receipt: first, now: 100)
        #expect(!lateTimeout)
        #expect(ledger.unread(by: 1) == 150 && !ledger.isStalled(":1.1"))
        let answered = ledger.receiptArrived(from: ":1.1", receipt: second)
        #expect(!answered)
        #expect(ledger.unread(by: 1) == 0)
    }

    @Test("behind: stalled, or owing a receipt with more than the user's share unread")
    func behind() {
        var ledger = OutputLedger(receiptAfter: 100, perUser: 300, forgivenessAfter: 10)
        _ = ledger.sent(200, to: ":1.1", user: 1)
        #expect(!ledger.isBehind(":1.1"), "owes a receipt, within its share")
        _ = ledger.sent(200, to: ":1.1", user: 1)
        #expect(ledger.isBehind(":1.1"))
        _ = ledger.receiptArrived(from: ":1.1")
        #expect(!ledger.isBehind(":1.1"))
    }

    @Test("an unanswered receipt is forgiven, each time twice as late, until one is answered")
    func forgiveness() {
        var ledger = OutputLedger(receiptAfter: 100, perUser: 300, forgivenessAfter: 10)
        func fill() {
            let ask = ledger.sent(400, to: ":1.1", user: 7)
            #expect(!ask.isEmpty, "a forgiven peer is asked again once it has been sent enough")
        }
        fill()
        var again = ledger.receiptLost(from: ":1.1", now: 100)
        #expect(!again && !ledger.isBlocked(7) && !ledger.isStalled(":1.1"), "the first is forgiven at once")
        #expect(ledger.unread(by: 7) == 0)
        fill()
        again = ledger.receiptLost(from: ":1.1", now: 105)
        #expect(again && ledger.isStalled(":1.1"), "the next not before 100 + 10: ask again")
        again = ledger.receiptLost(from: ":1.1", now: 110)
        #expect(!again && !ledger.isStalled(":1.1"))
        fill()
        _ = ledger.receiptLost(from: ":1.1", now: 125)
        #expect(ledger.isStalled(":1.1"), "then not before 110 + 20")
        _ = ledger.receiptLost(from: ":1.1", now: 130)
        #expect(!ledger.isStalled(":1.1"))
        // An answered receipt starts the doubling again.
        fill()
        _ = ledger.receiptArrived(from: ":1.1")
        fill()
        _ = ledger.receiptLost(from: ":1.1", now: 131)
        #expect(!ledger.isStalled(":1.1"))
    }
}

@Suite("Holders per user")
struct UserHoldersTests {
    @Test("one user's connections together hold at most the per-user limit; other users still can")
    func perUser() throws {
        var registry = HolderRegistry<Int>(perClientLimit: 4, perUserLimit: 6, globalLimit: 100)
        for key in 0..<4 { _ = try registry.hold(key, client: ":1.1", user: 65534) }
        _ = try registry.hold(4, client: ":1.2", user: 65534)
        _ = try registry.hold(5, client: ":1.2", user: 65534)
        let error = #expect(throws: HoldError.self) { try registry.hold(6, client: ":1.3", user: 65534) }
        #expect(error?.message.contains("per-user limit is 6") == true)
        // A key the user already holds through another connection costs it nothing more.
        #expect(try !registry.hold(0, client: ":1.3", user: 65534))
        #expect(registry.count(ofUser: 65534) == 6)
        #expect(try registry.hold(6, client: ":2.1", user: 4242))
        #expect(registry.isHeld(6, byUser: 4242) && !registry.isHeld(6, byUser: 65534))
        #expect(registry.isHeld(0, byUser: 65534) && !registry.isHeld(0, byUser: 4242))
    }

    @Test("a user stops seeing a key when its last connection holding it lets go")
    func visibility() throws {
        var registry = HolderRegistry<String>()
        _ = try registry.hold("a", client: ":1.1", user: 7)
        _ = try registry.hold("a", client: ":1.2", user: 7)
        _ = try registry.hold("a", client: ":1.3", user: 8)
        #expect(try !registry.release("a", client: ":1.1"))
        #expect(registry.isHeld("a", byUser: 7))
        #expect(registry.releaseAll(client: ":1.2").isEmpty)
        #expect(!registry.isHeld("a", byUser: 7) && registry.count(ofUser: 7) == 0)
        #expect(registry.isHeld("a", byUser: 8))
        #expect(Set(registry.keys(ofUser: 8)) == ["a"])
    }

    @Test("the per-user limit never exceeds the global one")
    func clamp() {
        #expect(HolderRegistry<Int>(perClientLimit: 1, perUserLimit: 50, globalLimit: 10).perUserLimit == 10)
    }

    @Test("holding and releasing 16,384 keys is linear")
    func scale() throws {
        var registry = HolderRegistry<Int>(perClientLimit: 100_000, perUserLimit: 100_000, globalLimit: 100_000)
        for key in 0..<16_384 { _ = try registry.hold(key, client: ":1.1", user: 1) }
        #expect(registry.releaseAll(client: ":1.1").count == 16_384)
        #expect(registry.count == 0 && registry.count(ofUser: 1) == 0)
    }
}
