import ReachabilityCore

/// What callers have not read (`OutputLedger`), the read receipts that show they read it, and
/// the refusals that wait their turn as answers do.
extension CallScheduler {
    // MARK: Output

    /// Whether a message to `destination` (`nil`: a broadcast) is sent, and which peers to ask
    /// for a read receipt once it is.
    public enum Delivery: Equatable, Sendable {
        /// Not sent: the destination is not reading (its receipt is overdue).
        case skip
        case send(askReceipts: [String])
    }

    /// Charges about `size` bytes sent to `destination` to its account until it reads them.
    public mutating func sending(_ size: Int, to destination: String?) -> Delivery {
        if let destination, dropsCalls(of: destination) { return .skip }
        guard receiptsAllowed, let destination, let user = users[destination] else { return .send(askReceipts: []) }
        return .send(askReceipts: ledger.sent(size, to: destination, user: user))
    }

    /// Whether `peer` is not sent signals now (it is stalled, or has more than its user's share
    /// unread): what changes for it is withheld, and sent once it reads again.
    public func isBehind(_ peer: String) -> Bool { ledger.isBehind(peer) }

    /// The id of the receipt to ask `peer` for, if it owes one.
    public func receipt(of peer: String) -> UInt64? { ledger.receipt(of: peer) }

    /// How long a receipt is waited for.
    public var receiptTimeout: Microseconds { limits.receiptTimeout }

    // MARK: Receipts

    /// What came of a receipt (a `Peer.Ping`).
    public enum ReceiptReply: Equatable, Sendable {
        /// Any answer from the peer itself (an error from it counts: it read the Ping).
        case answered
        /// The bus's policy forbids receipts.
        case forbidden
        /// Not answered within `receiptTimeout`.
        case timedOut
        /// The bus refused it at once: for the peer's full queue in the bus, or (`oursToo`)
        /// for the service's own calls awaiting replies.
        case refused(oursToo: Bool)
        /// The peer left: its departure closes its account.
        case gone
    }

    /// What the connection does about a receipt's outcome.
    public enum Verdict: Equatable, Sendable {
        case nothing
        /// The ledger changed for the peer (it read, or was forgiven, or owes a new receipt):
        /// serve its waiting calls and send what was withheld from it. `askAgain`: ask it for
        /// the next receipt first; `trim`: what it read is worth giving memory back for.
        case changed(peer: String, askAgain: Bool, trim: Bool)
        /// Ask the peer again `after` this long (a timer, not a loop).
        case retry(peer: String, after: Microseconds)
        /// Receipts are forbidden: no accounting of what peers read; everything withheld is sent.
        case receiptsForbidden
        /// The bus does not tell what it holds for a peer: receipts alone from now on.
        case queueStatsUnavailable
    }

    /// `peer` answered receipt `id`, or the bus did instead.
    public mutating func receiptAnswered(by peer: String, receipt id: UInt64, _ reply: ReceiptReply,
                                         flow: some FlowGauge) -> Verdict {
        switch reply {
        case .answered:
            return proven(by: peer, receipt: id)
        case .forbidden:
            receiptsAllowed = false
            ledger = limits.ledger()
            return .receiptsForbidden
        case .timedOut:
            let now = now()
            guard users[peer] != nil else { return .nothing }
            // Unless the answer may still wait behind what the bus wrote to the service (another
            // user's flood): a flood's victim was taken for a non-reader. Asked again later.
            if isReadingBehind(flow) { return .retry(peer: peer, after: limits.receiptRetry) }
            let askAgain = ledger.receiptLost(from: peer, receipt: id, now: now)
            return .changed(peer: peer, askAgain: askAgain, trim: false)
        case .refused(let oursToo):
            // Only a full queue in the bus says anything about the peer.
            let now = now()
            guard users[peer] != nil else { return .nothing }
            if !oursToo && !ledger.receiptLost(from: peer, receipt: id, now: now) {
                return .changed(peer: peer, askAgain: false, trim: false)
            }
            return .retry(peer: peer, after: oursToo ? limits.receiptRetry : limits.receiptRetryQueueFull)
        case .gone:
            return .nothing
        }
    }

    /// What the bus said it holds for a peer (`GetConnectionStats`, asked right after a receipt).
    public enum QueueStats: Equatable, Sendable {
        /// Its `OutgoingBytes` (`nil`: the answer did not say).
        case holds(Int?)
        /// Too many of our calls in flight, or the peer left: the receipt still counts.
        case busy
        /// Not allowed by the bus's policy, or not this bus's statistic.
        case unavailable
    }

    /// Whether to ask the bus what it holds for a peer along with each receipt.
    public var asksQueueStats: Bool { queueStatsAllowed }

    /// The bus answered what it holds for `peer` right after receipt `id`: nothing held means
    /// the peer read what the receipt covers, as if it had answered.
    public mutating func queueStats(of peer: String, receipt id: UInt64, _ stats: QueueStats) -> Verdict {
        switch stats {
        case .holds(let bytes):
            guard bytes == 0, users[peer] != nil else { return .nothing }
            return proven(by: peer, receipt: id)
        case .busy:
            return .nothing
        case .unavailable:
            queueStatsAllowed = false
            return .queueStatsUnavailable
        }
    }

    /// `peer` read everything receipt `id` covers.
    private mutating func proven(by peer: String, receipt id: UInt64) -> Verdict {
        let user = users[peer] ?? 0
        let before = ledger.unread(by: user)
        let askAgain = ledger.receiptArrived(from: peer, receipt: id)
        // What it read has been written and freed, which after a large reply is worth giving back.
        let trim = before - ledger.unread(by: user) >= limits.trimAfterRead
        return .changed(peer: peer, askAgain: askAgain, trim: trim)
    }

    // MARK: Refusals

    /// Whether a refusal waits its turn rather than leaving at once: answers wait to be
    /// written, or refusals already wait (they leave in order).
    public func refusalWaits(_ flow: some FlowGauge) -> Bool { isWritingBehind(flow) || !refusals.isEmpty }

    /// Queues `refusal` for `user` (`nil`: not identified yet) costing `cost` bytes; `false`
    /// when past even that bound (it is sent at once).
    public mutating func queueRefusal(_ refusal: Refusal, user: UserID?, cost: Int) -> Bool {
        do {
            try refusals.enqueue(refusal, user: user ?? Self.unidentifiedUser, cost: cost)
        } catch {
            return false
        }
        refusalsPeak = max(refusalsPeak, refusals.count)
        return true
    }

    /// The next refusal to send in this turn, `sent` sent already: round-robin between users,
    /// while the answers leave.
    public mutating func nextRefusal(sent: Int, _ flow: some FlowGauge) -> Refusal? {
        guard sent < limits.refusalsPerTurn, !isWritingBehind(flow) else { return nil }
        return refusals.next()?.item
    }

    /// How a turn of refusals ends.
    public enum RefusalsEnd: Equatable, Sendable {
        /// None left; `trim`: a long line drained, worth giving memory back.
        case drained(trim: Bool)
        /// Some wait for the socket: watch it (or, with no socket, come back next turn).
        case waitForOutput
        case nextTurn
    }

    /// The turn of refusals ended after `sent` were sent.
    public mutating func refusalsEnded(sent: Int, _ flow: some FlowGauge) -> RefusalsEnd {
        guard !refusals.isEmpty else {
            let trim = sent > 0 && refusalsPeak >= limits.refusalsPerTurn
            refusalsPeak = 0
            return .drained(trim: trim)
        }
        return isWritingBehind(flow) ? .waitForOutput : .nextTurn
    }
}
