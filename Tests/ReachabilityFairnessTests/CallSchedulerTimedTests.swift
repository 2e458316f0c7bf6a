import Testing
import ReachabilityCore
@testable import ReachabilityFairness

/// The scheduler's decisions that depend on time or on the bus's word: the connection-stats
/// witness, forgiveness, dropping stalled peers' calls, withheld delivery, refusals in turn.
@Suite("The call scheduler, on an injected clock")
struct CallSchedulerTimedTests {
    /// `peer` (of user 1) is left stalled: its first unanswered receipt forgiven at once, its
    /// second, a second later, not.
    static func stall(_ peer: String, _ s: inout Scheduler, _ clock: TestClock) {
        s.know(peer, as: 1)
        _ = s.sending(150, to: peer)
        _ = s.receiptAnswered(by: peer, receipt: s.receipt(of: peer)!, .timedOut, flow: Gauge.calm)
        _ = s.sending(150, to: peer)
        clock.advance(seconds: 1)
        _ = s.receiptAnswered(by: peer, receipt: s.receipt(of: peer)!, .timedOut, flow: Gauge.calm)
    }

    @Test("connection-stats witness: the bus holding nothing for a peer counts as its receipt")
    func connectionStatsWitness() {
        var s = Scheduler.small()
        s.know(":1.1", as: 1)
        #expect(s.asksQueueStats)
        _ = s.sending(150, to: ":1.1")
        let id = s.receipt(of: ":1.1")!
        #expect(s.queueStats(of: ":1.1", receipt: id, .holds(12)) == .nothing, "something still waits for it")
        #expect(s.queueStats(of: ":1.1", receipt: id, .holds(nil)) == .nothing)
        #expect(s.queueStats(of: ":1.1", receipt: id, .busy) == .nothing)
        #expect(s.receipt(of: ":1.1") == id)
        #expect(s.queueStats(of: ":1.1", receipt: id, .holds(0)) == .changed(peer: ":1.1", askAgain: false, trim: false))
        #expect(s.receipt(of: ":1.1") == nil && s.ledger.unread(by: 1) == 0)
        // Of a caller that left: nothing.
        s.know(":1.2", as: 2)
        _ = s.sending(150, to: ":1.2")
        let other = s.receipt(of: ":1.2")!
        _ = s.forget(":1.2")
        #expect(s.queueStats(of: ":1.2", receipt: other, .holds(0)) == .nothing)
        // Not this bus's statistic, or not allowed: receipts alone from now on.
        #expect(s.queueStats(of: ":1.1", receipt: id, .unavailable) == .queueStatsUnavailable)
        #expect(!s.asksQueueStats)
    }

    @Test("forgiveness: an unanswered receipt is forgiven at once, then 5 s, 10 s … later, until one is answered")
    func forgiveness() {
        let clock = TestClock()
        var s = Scheduler.small(clock)
        let peer = ":1.1"
        s.know(peer, as: 1)
        func timeOut() -> Scheduler.Verdict {
            if s.receipt(of: peer) == nil { _ = s.sending(150, to: peer) }
            return s.receiptAnswered(by: peer, receipt: s.receipt(of: peer)!, .timedOut, flow: Gauge.calm)
        }
        let forgiven = Scheduler.Verdict.changed(peer: peer, askAgain: false, trim: false)
        let owes = Scheduler.Verdict.changed(peer: peer, askAgain: true, trim: false)
        #expect(timeOut() == forgiven)
        #expect(!s.dropsUnread(from: peer) && s.ledger.unread(by: 1) == 0, "written off")
        clock.advance(seconds: 4.9)
        #expect(timeOut() == owes, "the next forgiveness is 5 s after the first")
        #expect(s.dropsUnread(from: peer))
        clock.advance(seconds: 0.1)
        #expect(timeOut() == forgiven)
        clock.advance(seconds: 9.9)
        #expect(timeOut() == owes, "then 10 s after that")
        clock.advance(seconds: 0.1)
        #expect(timeOut() == forgiven)
        // An answered receipt starts the count again.
        _ = s.sending(150, to: peer)
        _ = s.receiptAnswered(by: peer, receipt: s.receipt(of: peer)!, .answered, flow: Gauge.calm)
        clock.advance(seconds: 0.5)
        #expect(timeOut() == forgiven)
    }

    @Test("forgiveness: no verdict while messages for the service wait to be read; asked again a second later")
    func forgivenessWhileReadingBehind() {
        var s = Scheduler.small()
        s.know(":1.1", as: 1)
        _ = s.sending(150, to: ":1.1")
        let flow = Gauge.calm
        flow.toRead = 1
        let id = s.receipt(of: ":1.1")!
        #expect(s.receiptAnswered(by: ":1.1", receipt: id, .timedOut, flow: flow)
                    == .retry(peer: ":1.1", after: s.limits.receiptRetry))
        #expect(s.receipt(of: ":1.1") == id && s.ledger.unread(by: 1) == 150, "nothing forgiven, nothing lost")
        // Of a caller that left: nothing, whenever.
        _ = s.forget(":1.1")
        #expect(s.receiptAnswered(by: ":1.1", receipt: id, .timedOut, flow: Gauge.calm) == .nothing)
    }

    @Test("dropping stalled peers' calls: unread, undecoded, unanswered, and nothing more sent to it")
    func droppingStalledPeersCalls() {
        let clock = TestClock()
        var s = Scheduler.small(clock)
        s.know(":1.2", as: 2)
        _ = s.place("queued before", from: ":1.1", user: 1, cost: 1, flow: Gauge.flooded)
        Self.stall(":1.1", &s, clock)
        #expect(s.dropsUnread(from: ":1.1") && !s.dropsUnread(from: ":1.2"))
        #expect(s.place("after", from: ":1.1", user: 1, cost: 1, flow: Gauge.calm) == .drop)
        #expect(s.sending(100, to: ":1.1") == .skip)
        #expect(s.drain(Gauge.calm) == ["-queued before"], "dropped when its turn comes")
        // It reads again: its calls are served again.
        _ = s.receiptAnswered(by: ":1.1", receipt: s.receipt(of: ":1.1")!, .answered, flow: Gauge.calm)
        #expect(s.place("read", from: ":1.1", user: 1, cost: 1, flow: Gauge.calm) == .serveNow)
        // A caller that left: its queued calls are dropped when their turn comes.
        _ = s.place("2.0", from: ":1.2", user: 2, cost: 1, flow: Gauge.flooded)
        _ = s.forget(":1.2")
        #expect(s.drain(Gauge.calm) == ["-2.0"])
    }

    @Test("a bus that charges readers (dbus-broker): a caller that does not read is answered; signals still wait")
    func busThatChargesReaders() {
        let clock = TestClock()
        var s = Scheduler.small(clock)
        s.unreadCostsTheService = false
        Self.stall(":1.1", &s, clock)
        #expect(s.ledger.isStalled(":1.1"), "the ledger still knows it does not read")
        #expect(!s.dropsUnread(from: ":1.1"))
        #expect(s.place("stalled", from: ":1.1", user: 1, cost: 1, flow: Gauge.calm) == .serveNow)
        #expect(s.sending(100, to: ":1.1") != .skip, "its answers are sent: the bus charges them to it")
        #expect(s.isBehind(":1.1"), "its signals are withheld, as on any bus")
        // A user past its share unread: its calls do not wait for a receipt.
        s.know(":1.2", as: 2)
        _ = s.sending(1001, to: ":1.2")
        #expect(s.ledger.isBlocked(2))
        #expect(s.place("blocked", from: ":1.2", user: 2, cost: 1, flow: Gauge.calm) == .serveNow)
        _ = s.place("queued", from: ":1.2", user: 2, cost: 1, flow: Gauge.flooded)
        #expect(s.drain(Gauge.calm) == ["queued"])
    }

    @Test("withheld delivery: a peer stalled, or owing a receipt past its user's share, is sent no signals")
    func withheldDelivery() {
        let clock = TestClock()
        var s = Scheduler.small(clock)
        s.know(":1.2", as: 2)
        #expect(!s.isBehind(":1.2"))
        _ = s.sending(1001, to: ":1.2")
        #expect(s.isBehind(":1.2"), "saturated: it owes a receipt and has more than its share unread")
        let verdict = s.receiptAnswered(by: ":1.2", receipt: s.receipt(of: ":1.2")!, .answered, flow: Gauge.calm)
        #expect(verdict == .changed(peer: ":1.2", askAgain: false, trim: false), "what was withheld is sent now")
        #expect(!s.isBehind(":1.2"))
        Self.stall(":1.1", &s, clock)
        #expect(s.isBehind(":1.1"))
        // Receipts forbidden: nobody is behind (everything withheld is sent).
        #expect(s.receiptAnswered(by: ":1.1", receipt: 0, .forbidden, flow: Gauge.calm) == .receiptsForbidden)
        #expect(!s.isBehind(":1.1"))
    }

    @Test("refusals leave in turn: at once while answers leave, else queued round-robin until the socket drains")
    func refusalsInTurn() {
        var s = Scheduler.small { $0.refusalsPerTurn = 2 }
        let calm = Gauge.calm, behind = Gauge.calm
        behind.outgoing = 10_000
        #expect(!s.refusalWaits(calm) && s.refusalWaits(behind))
        let queued = [s.queueRefusal("1.0", user: 1, cost: 100), s.queueRefusal("1.1", user: 1, cost: 100),
                      s.queueRefusal("?", user: nil, cost: 100)]
        #expect(queued == [true, true, true])
        #expect(s.refusalWaits(calm), "behind those already waiting")
        #expect(s.hasWork)
        #expect(s.nextRefusal(sent: 0, behind) == nil)
        #expect(s.refusalsEnded(sent: 0, behind) == .waitForOutput)
        let first = s.nextRefusal(sent: 0, calm), second = s.nextRefusal(sent: 1, calm)
        #expect(first == "1.0" && second == "?", "round-robin between users")
        #expect(s.nextRefusal(sent: 2, calm) == nil, "refusalsPerTurn a turn")
        #expect(s.refusalsEnded(sent: 2, calm) == .nextTurn)
        #expect(s.nextRefusal(sent: 0, calm) == "1.1")
        #expect(s.refusalsEnded(sent: 1, calm) == .drained(trim: true), "a line as long as a turn gives memory back")
        #expect(s.refusalsEnded(sent: 0, calm) == .drained(trim: false))
        var tight = Scheduler.small { $0.queuedRefusals = 1 }
        let bounded = [tight.queueRefusal("a", user: 1, cost: 1), tight.queueRefusal("b", user: 2, cost: 1)]
        #expect(bounded == [true, false], "past the bound it is sent at once")
    }
}
