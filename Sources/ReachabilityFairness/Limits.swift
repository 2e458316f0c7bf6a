import ReachabilityCore

/// Every bound of the bus connection's flow and fairness, in one value (counts in what they
/// count, sizes in bytes, durations in `Microseconds`): how much it reads and
/// serves a turn, what callers may make it hold, when a caller is taken for one that does not
/// read. The bus connection is given one (`standard` unless a test says otherwise) and reads
/// every figure from it; what each bounds and why it has this value is told in
/// docs/hardening.md, "Flow and fairness limits" (a test holds that table to this type).
///
/// The limits on targets (per connection, per user, in all) are the daemon's options, not
/// these: an administrator may raise them, while these follow from the bus and the kernel.
public struct Limits: Sendable, Equatable {
    // MARK: Calls waiting their turn (`FairQueue`)

    /// Calls one user may have waiting to be served (calls).
    public var queuedCallsPerUser = 4096
    /// Bytes of calls one user may have waiting to be served (bytes).
    public var queuedBytesPerUser = 4 * 1024 * 1024
    /// Calls all users together may have waiting to be served, and callers waiting to be
    /// identified (calls).
    public var queuedCalls = 8192
    /// Bytes of calls all users together may have waiting to be served (bytes).
    public var queuedBytes = 8 * 1024 * 1024

    // MARK: Refusals waiting their turn

    /// `LimitsExceeded` refusals one user may have waiting to be sent (refusals).
    public var queuedRefusalsPerUser = 65_536
    /// Bytes of refusals one user may have waiting to be sent (bytes, as charged to its account).
    public var queuedRefusalBytesPerUser = 8 * 1024 * 1024
    /// Refusals all users together may have waiting to be sent (refusals).
    public var queuedRefusals = 131_072
    /// Bytes of refusals all users together may have waiting to be sent (bytes).
    public var queuedRefusalBytes = 16 * 1024 * 1024

    // MARK: What callers have not read (`OutputLedger`)

    /// Bytes sent to one connection after which a read receipt (`Peer.Ping`) is asked for (bytes).
    public var receiptAfter = 64 * 1024
    /// Bytes one user's connections may leave unread before its calls wait and its connections
    /// are sent no more signals (bytes).
    public var unreadPerUser = 1024 * 1024
    /// How long a read receipt is waited for before the connection is taken for one that does
    /// not read.
    public var receiptTimeout: Microseconds = 5_000_000
    /// The wait before a user's first forgiveness of a receipt that went unanswered; it doubles
    /// with each one until a receipt is answered.
    public var forgivenessAfter: Microseconds = 5_000_000
    /// How soon a receipt is asked again when no verdict can be drawn (messages for the service
    /// still wait to be read, or the bus refused it for our own calls in flight).
    public var receiptRetry: Microseconds = 1_000_000
    /// How soon a receipt is asked again when the bus refused it because the peer's queue in
    /// the bus is full.
    public var receiptRetryQueueFull: Microseconds = 10_000_000
    /// Identity requests (`GetConnectionUnixUser`) in flight at once (requests).
    public var identitiesInFlight = 48

    // MARK: Reading and serving

    /// Messages dispatched in one turn of the loop at most (messages).
    public var dispatchBatch = 256
    /// Reads ahead in one turn at most, about 2 KiB each (reads).
    public var readsPerTurn = 128
    /// Messages dispatched in a turn after which what the bus has written is read ahead: below
    /// it the connection is not flooded (messages).
    public var floodedAfter = 8
    /// Reads of 4 KiB in one readable event while what was read holds no whole message (reads).
    public var readsPerMessageTurn = 256
    /// Bytes in libdbus's outgoing queue beyond which answers are behind: queued calls wait and
    /// refusals queue (bytes).
    public var outgoingBehind = 4 * 1024
    /// The socket's send buffer a service connection asks for (bytes; the kernel doubles it).
    public var sendBuffer = 4 * 1024
    /// Queued calls served in one turn of the loop at most (calls).
    public var callsPerTurn = 64
    /// Queued refusals sent in one turn of the loop at most (refusals).
    public var refusalsPerTurn = 256

    // MARK: What a call may carry

    /// Descriptors libdbus may hold in messages read and not yet dispatched (descriptors).
    public var receivedDescriptors = 256
    /// Descriptors one message may carry (descriptors).
    public var messageDescriptors = 253
    /// Bytes of arguments a call may have before it is refused undecoded (bytes).
    public var argumentBytes = 64 * 1024

    // MARK: Giving memory back

    /// Calls queued at a flood's peak after which the drained queue's memory is returned (calls).
    public var trimAfterQueued = 128
    /// Bytes one receipt shows read after which freed memory is returned (bytes).
    public var trimAfterRead = 256 * 1024

    public init() {}

    /// The bounds this daemon runs with.
    public static let standard = Limits()

    /// The most descriptors a peer can make the process hold at once: what libdbus may hold,
    /// plus the message read when it reached that.
    public var peerDescriptorBound: Int { receivedDescriptors + messageDescriptors }

    /// The bounds of the queue of calls waiting their turn.
    public func callQueue<Item>(of _: Item.Type = Item.self) -> FairQueue<Item>.Limits {
        .init(perUserItems: queuedCallsPerUser, perUserCost: queuedBytesPerUser, totalItems: queuedCalls,
              totalCost: queuedBytes)
    }

    /// The bounds of the queue of refusals waiting to be sent.
    public func refusalQueue<Item>(of _: Item.Type = Item.self) -> FairQueue<Item>.Limits {
        .init(perUserItems: queuedRefusalsPerUser, perUserCost: queuedRefusalBytesPerUser,
              totalItems: queuedRefusals, totalCost: queuedRefusalBytes)
    }

    /// A ledger of unread output with these bounds.
    public func ledger() -> OutputLedger {
        OutputLedger(receiptAfter: receiptAfter, perUser: unreadPerUser, forgivenessAfter: UInt64(forgivenessAfter))
    }
}
