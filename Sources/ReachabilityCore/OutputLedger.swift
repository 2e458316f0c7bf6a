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
/// unread is *blocked*: its calls wait until a receipt comes. A peer that alone
/// has more than `perUser` unread while a receipt is outstanding is *stalled*:
/// it is not reading, and its further calls are dropped unanswered (an answer
/// would only add to what it does not read).
///
/// Some peers read without ever answering: a client that makes blocking calls
/// and never runs its library's dispatch (a script with no main loop) leaves
/// the `Ping` in its own queue. A receipt that times out is therefore
/// forgiven — the peer's unread bytes are written off — but each user's next
/// forgiveness comes twice as late as its last (`forgivenessAfter`, doubling),
/// until one of its peers answers a receipt. Such a client stalls for a while
/// every `perUser` bytes; a peer that really does not read gains `perUser`
/// bytes per forgiveness, so logarithmically in time.
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
    }

    private var peers: [String: Peer] = [:]
    private var unreadByUser: [UserID: Int] = [:]
    /// Per user: how many receipts were forgiven since one was answered, and when the next may be.
    private var forgiveness: [UserID: (count: Int, next: UInt64)] = [:]

    public init(receiptAfter: Int = 64 * 1024, perUser: Int = 1024 * 1024, forgivenessAfter: UInt64 = 10_000_000) {
        precondition(receiptAfter > 0 && perUser >= receiptAfter, "the user's share must hold one receipt's worth")
        self.receiptAfter = receiptAfter
        self.perUser = perUser
        self.forgivenessAfter = forgivenessAfter
    }

    /// Charges `bytes` sent to `peer`, a connection of `user`.
    /// - Returns: `true` when a receipt should be asked for now.
    public mutating func sent(_ bytes: Int, to peer: String, user: UserID) -> Bool {
        var entry = peers[peer] ?? Peer(user: user)
        entry.unread += bytes
        unreadByUser[entry.user, default: 0] += bytes
        defer { peers[peer] = entry }
        guard entry.covered == nil, entry.unread >= receiptAfter else { return false }
        entry.covered = entry.unread
        return true
    }

    /// `peer` answered the receipt: everything it covers has been read.
    /// - Returns: `true` when another receipt should be asked for now.
    public mutating func receiptArrived(from peer: String) -> Bool {
        guard var entry = peers[peer], let covered = entry.covered else { return false }
        entry.unread -= covered
        entry.covered = nil
        credit(entry.user, covered)
        forgiveness[entry.user] = nil
        defer { peers[peer] = entry.unread == 0 ? nil : entry }
        guard entry.unread >= receiptAfter else { return false }
        entry.covered = entry.unread
        return true
    }

    /// The receipt went unanswered at `now` (µs; the call timed out, or the bus refused
    /// it): forgiven if its user's turn for forgiveness has come, else still outstanding.
    /// - Returns: `true` when a new receipt is to be asked for, covering everything
    ///   unread: the peer was not forgiven (it still owes one). A forgiven peer is
    ///   asked again only once it has been sent `receiptAfter` more, so a client that
    ///   never answers costs no wake-up while nothing is sent to it.
    public mutating func receiptLost(from peer: String, now: UInt64) -> Bool {
        guard var entry = peers[peer] else { return false }
        let user = entry.user
        let turn = forgiveness[user] ?? (0, 0)
        guard now >= turn.next else {
            entry.covered = entry.unread
            peers[peer] = entry
            return true
        }
        credit(user, entry.unread)
        forgiveness[user] = (turn.count + 1, now + forgivenessAfter << min(turn.count, 40))
        peers[peer] = nil
        return false
    }

    /// `peer` left the bus: nothing it had unread costs anybody any more.
    public mutating func forget(_ peer: String) {
        guard let entry = peers.removeValue(forKey: peer) else { return }
        credit(entry.user, entry.unread)
    }

    /// Whether `user`'s calls must wait: its peers have more than its share unread.
    public func isBlocked(_ user: UserID) -> Bool { (unreadByUser[user] ?? 0) > perUser }

    /// Whether `peer` is not reading: alone over a user's share, with a receipt outstanding.
    public func isStalled(_ peer: String) -> Bool {
        guard let entry = peers[peer] else { return false }
        return entry.covered != nil && entry.unread > perUser
    }

    /// Bytes `user`'s peers may not have read yet.
    public func unread(by user: UserID) -> Int { unreadByUser[user] ?? 0 }

    /// Bytes all peers together may not have read yet.
    public var totalUnread: Int { unreadByUser.values.reduce(0, +) }

    private mutating func credit(_ user: UserID, _ bytes: Int) {
        let left = (unreadByUser[user] ?? 0) - bytes
        unreadByUser[user] = left > 0 ? left : nil
    }
}
