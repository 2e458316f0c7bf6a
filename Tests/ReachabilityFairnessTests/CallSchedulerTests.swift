import Testing
import ReachabilityCore
@testable import ReachabilityFairness

/// What the scheduler is shown of a socket: set by the test, and counted, so a test can tell
/// which readings a decision needed (each may be a system call).
final class Gauge: FlowGauge {
    var waiting = false
    var outgoing = 0
    var toRead = 0
    var readingsOfBytesToRead = 0

    var messagesWaiting: Bool { waiting }
    var outgoingBytes: Int { outgoing }
    var bytesToRead: Int {
        readingsOfBytesToRead += 1
        return toRead
    }

    static var calm: Gauge { Gauge() }
    static var flooded: Gauge {
        let gauge = Gauge()
        gauge.waiting = true
        return gauge
    }
}

/// A monotonic clock the test moves.
final class TestClock {
    var microseconds: UInt64 = 0
    func advance(seconds: Double) { microseconds += UInt64(seconds * 1_000_000) }
}

typealias Scheduler = CallScheduler<String, String>

extension CallScheduler where Call == String, Refusal == String {
    /// A scheduler on small figures, read by the test's clock.
    static func small(_ clock: TestClock = TestClock(), _ change: (inout Limits) -> Void = { _ in }) -> Scheduler {
        var limits = Limits.standard
        limits.receiptAfter = 100
        limits.unreadPerUser = 1000
        change(&limits)
        return Scheduler(limits: limits, now: { clock.microseconds })
    }

    /// Makes `sender` a known caller of `user`.
    mutating func know(_ sender: String, as user: UserID) {
        _ = admit("hello", from: sender)
        _ = identified(sender, .user(user))
    }

    /// Every step until the scheduler stops serving, as the calls served ("-x": dropped).
    mutating func drain(_ flow: some FlowGauge, upTo most: Int = 100) -> [String] {
        var served: [String] = []
        for _ in 0..<most {
            switch nextStep(flow) {
            case .serve(let call): served.append(call)
            case .drop(let call): served.append("-" + call)
            case .waitForOutput: return served + ["wait"]
            case .idle: return served
            }
        }
        return served
    }
}

@Suite("The call scheduler: every decision of the bus connection's flow and fairness")
struct CallSchedulerTests {
    @Test("caller identity: calls wait, bounded, for their caller's user; identity requests are bounded in flight")
    func callerIdentity() {
        var s = Scheduler.small { $0.identitiesInFlight = 2; $0.queuedCallsPerUser = 2; $0.queuedCalls = 4 }
        #expect(s.admit("a1", from: ":1.1") == .waits(identifyNow: true))
        #expect(s.admit("a2", from: ":1.1") == .waits(identifyNow: false), "one request per caller")
        #expect(s.admit("a3", from: ":1.1")
                    == .refuse("too many calls sent before the service could tell who sent them"))
        #expect(s.admit("b1", from: ":1.2") == .waits(identifyNow: true))
        #expect(s.admit("c1", from: ":1.3") == .waits(identifyNow: false), "two requests in flight at most")
        #expect(s.identifying == 2 && s.unidentifiedCount == 4)
        #expect(s.admit("d1", from: ":1.4") == .refuse("the service is busy identifying 4 callers"))

        // The answer releases the caller's calls, and the next caller waiting is asked about.
        let first = s.identified(":1.1", .user(1000))
        #expect(first.user == 1000 && first.calls == ["a1", "a2"] && first.identifyNext == [":1.3"])
        #expect(s.admit("a4", from: ":1.1") == .known(1000))
        #expect(s.user(of: ":1.1") == 1000)

        // The bus refused the request itself: asked again.
        let refused = s.identified(":1.2", .busRefused)
        #expect(refused.calls.isEmpty && refused.identifyNext == [":1.2"])
        // It left meanwhile: its calls are dropped (no user to serve them for).
        let unknown = s.identified(":1.2", .unknown)
        #expect(unknown.user == nil && unknown.calls == ["b1"])

        // A caller that leaves before its answer comes: its calls go with it, the late answer is moot.
        #expect(s.forget(":1.3").dropped == ["c1"])
        let late = s.identified(":1.3", .user(5))
        #expect(late.user == nil && late.calls.isEmpty && s.user(of: ":1.3") == nil)
        #expect(s.identifying == 0 && s.unidentifiedCount == 0)
    }

    @Test("round-robin queue: a user with many calls waiting delays another user's call by one call")
    func roundRobinQueue() {
        var s = Scheduler.small { $0.queuedCallsPerUser = 3 }
        s.know(":1.1", as: 1)
        s.know(":1.2", as: 2)
        let flood = Gauge.flooded
        for n in 0..<3 { #expect(s.place("1.\(n)", from: ":1.1", user: 1, cost: 10, flow: flood) == .queued) }
        #expect(s.place("1.3", from: ":1.1", user: 1, cost: 10, flow: flood)
                    == .refuse("this user already has 3 calls (30 bytes) waiting to be served; "
                               + "try again once the answers already sent have been read"))
        #expect(s.shareUsedUp(by: ":1.1")?.user == 1, "refused before it is even decoded")
        #expect(s.shareUsedUp(by: ":1.2") == nil)
        #expect(s.place("2.0", from: ":1.2", user: 2, cost: 10, flow: flood) == .queued)
        #expect(s.queuedCalls == 4 && s.hasWork)
        #expect(s.drain(Gauge.calm) == ["1.0", "2.0", "1.1", "1.2"])
        #expect(!s.hasWork)
    }

    @Test("round-robin queue: a queue drained after a flood gives its memory back, once")
    func roundRobinQueueTrim() {
        var s = Scheduler.small { $0.trimAfterQueued = 2 }
        s.know(":1.1", as: 1)
        for n in 0..<2 { _ = s.place("\(n)", from: ":1.1", user: 1, cost: 1, flow: Gauge.flooded) }
        _ = s.drain(Gauge.calm, upTo: 2)
        guard case .idle(trim: true) = s.nextStep(Gauge.calm) else { Issue.record("no trim"); return }
        guard case .idle(trim: false) = s.nextStep(Gauge.calm) else { Issue.record("trimmed twice"); return }
    }

    @Test("fast path: with nothing waiting and nothing read behind it, a call is served at once")
    func fastPath() {
        var s = Scheduler.small()
        s.know(":1.1", as: 1)
        let calm = Gauge.calm
        #expect(s.place("a", from: ":1.1", user: 1, cost: 10, flow: calm) == .serveNow)
        #expect(calm.readingsOfBytesToRead == 0, "the fast path costs no system call beyond libdbus's")
        #expect(!s.hasWork)
        // More read behind it: it waits its turn; and then so does the next, however calm.
        #expect(s.place("b", from: ":1.1", user: 1, cost: 10, flow: Gauge.flooded) == .queued)
        #expect(s.place("c", from: ":1.1", user: 1, cost: 10, flow: calm) == .queued)
        #expect(s.drain(calm) == ["b", "c"])
        // Answers waiting to be written: it waits too.
        let behind = Gauge.calm
        behind.outgoing = s.limits.outgoingBehind + 1
        #expect(s.place("d", from: ":1.1", user: 1, cost: 10, flow: behind) == .queued)
    }

    @Test("flood read-ahead: past floodedAfter messages in a turn, what the bus wrote is read ahead, bounded")
    func floodReadAhead() {
        let s = Scheduler.small()
        let flow = Gauge.calm
        flow.toRead = 4096
        flow.waiting = true
        #expect(s.dispatchStep(dispatched: 0, reads: 0, flow) == .dispatch)
        flow.waiting = false
        #expect(s.dispatchStep(dispatched: s.limits.floodedAfter - 1, reads: 0, flow) == .done,
                "a few calls are served as soon as they are read")
        #expect(flow.readingsOfBytesToRead == 0)
        #expect(s.dispatchStep(dispatched: s.limits.floodedAfter, reads: 0, flow) == .readAhead)
        #expect(s.dispatchStep(dispatched: s.limits.floodedAfter, reads: s.limits.readsPerTurn - 1, flow) == .readAhead)
        #expect(s.dispatchStep(dispatched: s.limits.floodedAfter, reads: s.limits.readsPerTurn, flow) == .done)
        flow.toRead = 0
        #expect(s.dispatchStep(dispatched: s.limits.floodedAfter, reads: 0, flow) == .done)
        flow.waiting = true
        #expect(s.dispatchStep(dispatched: s.limits.dispatchBatch, reads: 0, flow) == .nextTurn,
                "the loop's other sources run between two batches")
    }

    @Test("serving while answers leave: queued calls wait while the socket is full, and go on when it drains")
    func servingWhileAnswersLeave() {
        var s = Scheduler.small()
        s.know(":1.1", as: 1)
        for n in 0..<3 { _ = s.place("\(n)", from: ":1.1", user: 1, cost: 1, flow: Gauge.flooded) }
        let flow = Gauge.calm
        flow.outgoing = s.limits.outgoingBehind
        #expect(!s.isWritingBehind(flow), "up to outgoingBehind the answers are leaving")
        flow.outgoing += 1
        #expect(s.isWritingBehind(flow) && s.isFlooded(flow))
        #expect(s.drain(flow) == ["0", "wait"], "a watch on the socket, not a timer")
        flow.outgoing = 0
        #expect(s.drain(flow) == ["1", "2"])
    }

    @Test("one call per user while behind: each user is served once, a user who just came too")
    func oneCallPerUserWhileBehind() {
        var s = Scheduler.small()
        for user: UserID in 1...4 { s.know(":1.\(user)", as: user) }
        for n in 0..<3 { _ = s.place("1.\(n)", from: ":1.1", user: 1, cost: 1, flow: Gauge.flooded) }
        _ = s.place("2.0", from: ":1.2", user: 2, cost: 1, flow: Gauge.flooded)
        _ = s.place("3.0", from: ":1.3", user: 3, cost: 1, flow: Gauge.flooded)
        let behind = Gauge.calm
        behind.outgoing = 10_000
        #expect(s.drain(behind) == ["1.0", "2.0", "3.0", "wait"])
        // Another user's call, while still behind: not made to wait for the line the others made.
        _ = s.place("4.0", from: ":1.4", user: 4, cost: 1, flow: behind)
        #expect(s.drain(behind) == ["4.0", "wait"])
        // Once the answers leave, the round starts again.
        #expect(s.drain(Gauge.calm) == ["1.1", "1.2"])
    }

    @Test("4 KiB send buffer: a serving connection asks for a few answers' worth, its Limits' figure")
    func sendBuffer() {
        #expect(Scheduler.small().sendBuffer == 4096)
        #expect(Scheduler.small { $0.sendBuffer = 8192 }.sendBuffer == 8192)
        // As small as the line that counts as behind: what the socket cannot take is seen.
        #expect(Limits.standard.sendBuffer == Limits.standard.outgoingBehind)
    }

    @Test("unread ledger: what is sent is charged; receipts are asked past receiptAfter; a user past its share waits")
    func unreadLedger() {
        var s = Scheduler.small()
        s.know(":1.1", as: 1)
        s.know(":1.2", as: 1)
        #expect(s.sending(60, to: ":1.1") == .send(askReceipts: []))
        #expect(s.sending(60, to: ":1.1") == .send(askReceipts: [":1.1"]))
        #expect(s.sending(10_000, to: nil) == .send(askReceipts: []), "a broadcast is charged to nobody")
        #expect(s.sending(10_000, to: ":1.9") == .send(askReceipts: []), "nor is a caller not identified")
        #expect(s.sending(50, to: ":1.2") == .send(askReceipts: []))
        // Past its share the user's calls wait, and each of its peers with anything unread is asked.
        #expect(s.sending(900, to: ":1.1") == .send(askReceipts: [":1.2"]))
        #expect(s.ledger.isBlocked(1))
        #expect(s.place("a", from: ":1.2", user: 1, cost: 1, flow: Gauge.calm) == .queued)
        #expect(s.drain(Gauge.calm) == [], "it waits until its peers have read")
        let id = s.receipt(of: ":1.1")!
        #expect(s.receiptAnswered(by: ":1.1", receipt: id, .answered, flow: Gauge.calm)
                    == .changed(peer: ":1.1", askAgain: true, trim: false), "120 covered, 900 still unread")
        #expect(!s.ledger.isBlocked(1))
        #expect(s.drain(Gauge.calm) == ["a"])
    }

    @Test("unread ledger: a receipt showing much read gives memory back")
    func unreadLedgerTrim() {
        var s = Scheduler.small { $0.unreadPerUser = 1_000_000; $0.trimAfterRead = 500 }
        s.know(":1.1", as: 1)
        _ = s.sending(600, to: ":1.1")
        #expect(s.receiptAnswered(by: ":1.1", receipt: s.receipt(of: ":1.1")!, .answered, flow: Gauge.calm)
                    == .changed(peer: ":1.1", askAgain: false, trim: true))
    }

    @Test("receipts with ids: a late answer to an old receipt never vouches for a newer one")
    func receiptsWithIds() {
        var s = Scheduler.small()
        s.know(":1.1", as: 1)
        _ = s.sending(150, to: ":1.1")
        let first = s.receipt(of: ":1.1")!
        _ = s.receiptAnswered(by: ":1.1", receipt: first, .answered, flow: Gauge.calm)
        #expect(s.receipt(of: ":1.1") == nil)
        _ = s.sending(150, to: ":1.1")
        let second = s.receipt(of: ":1.1")!
        #expect(second != first)
        _ = s.receiptAnswered(by: ":1.1", receipt: first, .answered, flow: Gauge.calm)
        #expect(s.receipt(of: ":1.1") == second && s.ledger.unread(by: 1) == 150, "the old answer says nothing")
        _ = s.receiptAnswered(by: ":1.1", receipt: second, .answered, flow: Gauge.calm)
        #expect(s.ledger.unread(by: 1) == 0)
    }

    @Test("receipts: refused by the bus, forbidden by its policy, or the peer gone")
    func receiptsRefused() {
        let clock = TestClock()
        var s = Scheduler.small(clock)
        s.know(":1.1", as: 1)
        _ = s.sending(150, to: ":1.1")
        let id = s.receipt(of: ":1.1")!
        // Our own calls in flight: no verdict on the peer; asked again a second later.
        #expect(s.receiptAnswered(by: ":1.1", receipt: id, .refused(oursToo: true), flow: Gauge.calm)
                    == .retry(peer: ":1.1", after: s.limits.receiptRetry))
        #expect(s.receiptAnswered(by: ":1.1", receipt: id, .gone, flow: Gauge.calm) == .nothing)
        // Its queue in the bus is full: counted as unanswered (forgiven the first time).
        #expect(s.receiptAnswered(by: ":1.1", receipt: id, .refused(oursToo: false), flow: Gauge.calm)
                    == .changed(peer: ":1.1", askAgain: false, trim: false))
        _ = s.sending(150, to: ":1.1")
        clock.advance(seconds: 1)
        #expect(s.receiptAnswered(by: ":1.1", receipt: s.receipt(of: ":1.1")!, .refused(oursToo: false),
                                  flow: Gauge.calm) == .retry(peer: ":1.1", after: s.limits.receiptRetryQueueFull))
        // The policy forbids receipts: no accounting at all from now on.
        #expect(s.receiptAnswered(by: ":1.1", receipt: 0, .forbidden, flow: Gauge.calm) == .receiptsForbidden)
        #expect(!s.dropsUnread(from: ":1.1") && s.ledger.totalUnread == 0)
        #expect(s.sending(100_000, to: ":1.1") == .send(askReceipts: []))
    }
}
