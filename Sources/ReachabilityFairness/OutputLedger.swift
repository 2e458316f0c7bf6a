import ReachabilityCore

/// What the service has sent to each peer that the peer may not have read yet,
/// and so what it costs the service on the bus.
///
/// A message bus charges a message that waits for its reader to somebody:
/// dbus-daemon to the *sender* (the service), whose connection it stops reading
/// once that charge passes its `max_incoming_bytes`; dbus-broker to the reader's
/// user. Either way a peer that never reads must not get more than its share.
/// The service cannot see the bus's queues, but it can ask for a read receipt:
/// a `Peer.Ping` sent to the peer is answered only after the peer has read
/// everything sent before it (the bus keeps order per pair of connections).
///
/// So each peer's unread bytes grow with every reply, error or unicast signal
/// sent to it; when they pass `receiptAfter`, a receipt is asked for, and its
/// answer takes off what it covers. A user whose peers have more than `perUser`
/// unread is *blocked*: its calls wait until a receipt comes, and every one of
/// its peers with anything unread is asked for one (many connections with a
/// little each add up too). A peer whose receipt went unanswered for the
/// receipt's timeout is *stalled*: it is not reading, its further calls are
/// dropped unanswered (an answer would only add to what it does not read), and
/// nothing else is sent to it either (its targets' signals) until it answers.
///
/// Some peers read without ever answering: a client that makes blocking calls
/// and never runs its library's dispatch (a script with no main loop) leaves
/// the `Ping` in its own queue. A receipt that times out is therefore
/// forgiven — the peer's unread bytes are written off — but each user's next
/// forgiveness comes twice as late as its last (`forgivenessAfter`, doubling),
/// until one of its peers answers a receipt. Such a client stalls for a while
/// every `perUser` bytes; a peer that really does not read gains `perUser`
/// bytes per forgiveness, so logarithmically in time.
///
/// On dbus-broker the ledger holds no call back (`CallScheduler.unreadCostsTheService`): the
/// broker charges the reader, so only signals follow it there.
///
/// The bus itself can vouch for such a peer: dbus-daemon answers
/// `GetConnectionStats` with the bytes it still holds for a connection
/// (`OutgoingBytes`), and a peer that reads — from a main loop, a thread, or
/// inside its own blocking call — leaves none there. Asked right after a
/// receipt (the bus handles the service's messages in order, so everything the
/// receipt covers has reached the peer's queue by then), an empty queue is as
/// good as the answer (`busQueueEmpty`): what the peer has not read is then at
/// most what its socket holds. Each receipt has an id, so a late answer to an
/// old receipt never vouches for a newer one.
public struct OutputLedger: Sendable {
    public let receiptAfter: Int
    public let perUser: Int
    /// The wait before a user's first forgiveness (µs); it doubles with each one.
    public let forgivenessAfter: UInt64

    private struct Peer: Sendable {
        let user: UserID
        var unread = 0
        /// The unread bytes the receipt in flight covers; `nil` when none is.
        var covered: Int?
        /// Whether the receipt in flight is overdue (it timed out and was not forgiven).
        var overdue = false
        /// The id of the receipt in flight (meaningful while `covered` is set).
        var receipt: UInt64 = 0
    }

    /// The id the next receipt gets.
    private var nextReceipt: UInt64 = 1

    private var peers: [String: Peer] = [:]
    private var peersByUser: [UserID: Set<String>] = [:]
    private var unreadByUser: [UserID: Int] = [:]
    /// Per user: how many receipts were forgiven since one was answered, and when the next may be.
    private var forgiveness: [UserID: (count: Int, next: UInt64)] = [:]

    public init(receiptAfter: Int = Limits.standard.receiptAfter, perUser: Int = Limits.standard.unreadPerUser,
                forgivenessAfter: UInt64 = UInt64(Limits.standard.forgivenessAfter)) {
        precondition(receiptAfter > 0 && perUser >= receiptAfter, "the user's share must hold one receipt's worth")
        self.receiptAfter = receiptAfter
        self.perUser = perUser
        self.forgivenessAfter = forgivenessAfter
    }

    /// Charges `bytes` sent to `peer`, a connection of `user`.
    /// - Returns: the peers to ask for a receipt now: `peer` once it has `receiptAfter`
    ///   unread, and every peer of a user that has just become blocked.
    public mutating func sent(_ bytes: Int, to peer: String, user: UserID) -> [String] {
        let wasBlocked = isBlocked(user)
        if peers[peer] == nil {
            peers[peer] = Peer(user: user)
            peersByUser[user, default: []].insert(peer)
        }
        let owner = peers[peer]!.user
        peers[peer]!.unread += bytes
        unreadByUser[owner, default: 0] += bytes
        if !wasBlocked && isBlocked(owner) {
            return peersByUser[owner, default: []].filter { ask($0, atLeast: 1) }
        }
        return ask(peer, atLeast: receiptAfter) ? [peer] : []
    }

    /// Marks a receipt as asked for from `peer` if it has none in flight and `atLeast` unread.
    private mutating func ask(_ peer: String, atLeast bytes: Int) -> Bool {
        guard let entry = peers[peer], entry.covered == nil, entry.unread >= bytes else { return false }
        peers[peer]!.covered = entry.unread
        peers[peer]!.receipt = nextReceipt
        nextReceipt += 1
        return true
    }

    /// The id of the receipt `peer` owes, if it owes one: an answer names it.
    public func receipt(of peer: String) -> UInt64? {
        guard let entry = peers[peer], entry.covered != nil else { return nil }
        return entry.receipt
    }

    /// The bus holds nothing more for `peer` (asked right after receipt `id`): the peer
    /// read everything that receipt covers, as if it had answered it.
    /// - Returns: `true` when another receipt should be asked for now.
    public mutating func busQueueEmpty(for peer: String, receipt id: UInt64) -> Bool {
        receiptArrived(from: peer, receipt: id)
    }

    /// `peer` answered the receipt (`id`: which one; `nil`: the one in flight, whichever it
    /// is): everything it covers has been read. An answer to an earlier receipt says nothing.
    /// - Returns: `true` when another receipt should be asked for now.
    public mutating func receiptArrived(from peer: String, receipt id: UInt64? = nil) -> Bool {
        guard var entry = peers[peer], let covered = entry.covered, id == nil || id == entry.receipt else {
            return false
        }
        entry.unread -= covered
        entry.covered = nil
        entry.overdue = false
        credit(entry.user, covered)
        forgiveness[entry.user] = nil
        guard entry.unread > 0 else {
            remove(peer, of: entry.user)
            return false
        }
        peers[peer] = entry
        return ask(peer, atLeast: isBlocked(entry.user) ? 1 : receiptAfter)
    }

    /// The receipt went unanswered at `now` (µs; the call timed out, or the bus refused
    /// it): forgiven if its user's turn for forgiveness has come, else still outstanding.
    /// - Returns: `true` when a new receipt is to be asked for, covering everything
    ///   unread: the peer was not forgiven (it still owes one). A forgiven peer is
    ///   asked again only once it has been sent `receiptAfter` more, so a client that
    ///   never answers costs no wake-up while nothing is sent to it.
    public mutating func receiptLost(from peer: String, receipt id: UInt64? = nil, now: UInt64) -> Bool {
        guard var entry = peers[peer], id == nil || (entry.covered != nil && id == entry.receipt) else { return false }
        let user = entry.user
        let turn = forgiveness[user] ?? (0, 0)
        guard now >= turn.next else {
            entry.covered = entry.unread
            entry.overdue = true
            entry.receipt = nextReceipt
            nextReceipt += 1
            peers[peer] = entry
            return true
        }
        credit(user, entry.unread)
        forgiveness[user] = (turn.count + 1, now + forgivenessAfter << min(turn.count, 40))
        remove(peer, of: user)
        return false
    }

    /// `peer` left the bus: nothing it had unread costs anybody any more.
    /// - Returns: the bytes it had not read.
    @discardableResult
    public mutating func forget(_ peer: String) -> Int {
        guard let entry = peers[peer] else { return 0 }
        remove(peer, of: entry.user)
        credit(entry.user, entry.unread)
        return entry.unread
    }

    private mutating func remove(_ peer: String, of user: UserID) {
        peers[peer] = nil
        peersByUser[user]?.remove(peer)
        if peersByUser[user]?.isEmpty == true { peersByUser[user] = nil }
    }

    /// Whether `user`'s calls must wait: its peers have more than its share unread.
    public func isBlocked(_ user: UserID) -> Bool { (unreadByUser[user] ?? 0) > perUser }

    /// Whether `peer` is not reading: its receipt went unanswered for the receipt's timeout,
    /// and was not forgiven.
    public func isStalled(_ peer: String) -> Bool { peers[peer]?.overdue ?? false }

    /// Whether `peer` is sent no more signals for now: it owes a receipt and has more than
    /// its user's share (`perUser`) unread. One evaluation sends a connection at most its 256
    /// targets' signals (some 300 KB), and a peer that reads answers the receipt between two:
    /// only a peer that has not read for a while gets here. Nothing it is not sent is lost:
    /// which of its objects changed is kept, and their current state is sent once it reads.
    public func isSaturated(_ peer: String) -> Bool {
        guard let entry = peers[peer], entry.covered != nil else { return false }
        return entry.unread > perUser
    }

    /// Whether `peer` is not sent signals now (it is stalled or saturated): what changes for
    /// it is kept as a change to send once it reads again.
    public func isBehind(_ peer: String) -> Bool { isStalled(peer) || isSaturated(peer) }

    /// Whether `peer` has a receipt outstanding (it has been sent `receiptAfter` since it last
    /// showed it reads).
    public func owesReceipt(_ peer: String) -> Bool { peers[peer]?.covered != nil }

    /// Bytes `user`'s peers may not have read yet.
    public func unread(by user: UserID) -> Int { unreadByUser[user] ?? 0 }

    /// Bytes all peers together may not have read yet.
    public var totalUnread: Int { unreadByUser.values.reduce(0, +) }

    private mutating func credit(_ user: UserID, _ bytes: Int) {
        let left = (unreadByUser[user] ?? 0) - bytes
        unreadByUser[user] = left > 0 ? left : nil
    }
}
