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
public struct OutputLedger: Sendable {
    public let receiptAfter: Int
    public let perUser: Int

    private struct Peer: Sendable {
        let user: UserID
        var unread = 0
        /// The unread bytes the receipt in flight covers; `nil` when none is.
        var covered: Int?
    }

    private var peers: [String: Peer] = [:]
    private var unreadByUser: [UserID: Int] = [:]

    public init(receiptAfter: Int = 64 * 1024, perUser: Int = 1024 * 1024) {
        precondition(receiptAfter > 0 && perUser >= receiptAfter, "the user's share must hold one receipt's worth")
        self.receiptAfter = receiptAfter
        self.perUser = perUser
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
        defer { peers[peer] = entry.unread == 0 ? nil : entry }
        guard entry.unread >= receiptAfter else { return false }
        entry.covered = entry.unread
        return true
    }

    /// The receipt went unanswered (the call timed out): ask again, covering everything unread.
    /// - Returns: `true` when `peer` is still known (ask again).
    public mutating func receiptLost(from peer: String) -> Bool {
        guard var entry = peers[peer] else { return false }
        entry.covered = entry.unread
        peers[peer] = entry
        return true
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
