import ReachabilityCore

/// What a connection can see of its own socket and of libdbus's queues, read only when a
/// decision needs it (each read may be a system call).
public protocol FlowGauge {
    /// Whether messages have been read and wait to be dispatched.
    var messagesWaiting: Bool { get }
    /// Bytes of the connection's outgoing queue that the socket has not taken yet.
    var outgoingBytes: Int { get }
    /// Bytes the bus has written to the connection that it has not read yet.
    var bytesToRead: Int { get }
}

/// Every decision of a service connection's flow and fairness, without the bus: who calls
/// (identity), what is served next (round-robin between users, the fast path, one call per
/// user while answers wait to be written), when a flood is read ahead, what each caller has
/// not read (the ledger, its receipts, the bus's word on its queue, forgiveness), whose
/// calls are dropped unread, whose signals are withheld, and when a timer or a watch is
/// wanted and for when. The bus connection moves the bytes and asks it; what it can see of
/// its socket it passes as a `FlowGauge`, and the time comes from `now` (monotonic µs).
///
/// Each bound is read from `limits` (docs/hardening.md, "Flow and fairness limits"); why each
/// decision is made is told in docs/hardening.md, "Fair to every user".
public struct CallScheduler<Call, Refusal> {
    public let limits: Limits
    /// Monotonic microseconds: when a receipt went unanswered, for forgiveness.
    public let now: () -> UInt64

    /// The Unix user of each caller still on the bus, by unique name.
    public private(set) var users: [String: UserID] = [:]
    /// Calls from callers whose user is being asked for, by unique name.
    private var unidentified: [String: [Call]] = [:]
    public private(set) var unidentifiedCount = 0
    /// Identity requests in flight, and the callers waiting to be asked about.
    public private(set) var identifying = 0
    private var toIdentify = Ring<String>()
    /// Calls waiting their turn, with their senders.
    private var queue: FairQueue<(call: Call, sender: String)>
    public internal(set) var ledger: OutputLedger
    /// Whether the bus lets the service ask peers for read receipts (its policy may not).
    public internal(set) var receiptsAllowed = true
    /// Whether the bus tells the service what it holds for a peer (`GetConnectionStats`).
    public internal(set) var queueStatsAllowed = true
    /// Whether what a peer leaves unread costs the service: dbus-daemon charges it to the sender
    /// (the service), and stops reading the service once that passes its `max_incoming_bytes`.
    /// dbus-broker charges it to the reader and disconnects a reader whose reply would pass its
    /// quota: there a caller that does not read costs only itself, so its calls are served and
    /// answered as anyone's, and only signals keep following the ledger (withheld, not lost).
    public var unreadCostsTheService = true
    /// The most calls queued since the queue last drained after a flood.
    private var peakQueued = 0
    /// The users served since answers began to wait to be written (`nil`: they do not).
    private var servedWhileBehind: Set<UserID>?
    /// Refusals not sent yet, round-robin between users.
    var refusals: FairQueue<Refusal>
    var refusalsPeak = 0

    /// The user refusals are charged to while their caller is not identified yet.
    public static var unidentifiedUser: UserID { UserID.max }

    public init(limits: Limits = .standard, now: @escaping () -> UInt64) {
        self.limits = limits
        self.now = now
        queue = FairQueue(limits: limits.callQueue())
        ledger = limits.ledger()
        refusals = FairQueue(limits: limits.refusalQueue())
    }

    /// The number of calls waiting their turn.
    public var queuedCalls: Int { queue.count }
    /// Whether anything waits to be served or sent: serving is to be scheduled.
    public var hasWork: Bool { !queue.isEmpty || !refusals.isEmpty }
    /// The user of `peer`, once known.
    public func user(of peer: String) -> UserID? { users[peer] }

    // MARK: Caller identity

    /// What to do with a call from `sender` that has just been read.
    public enum Admission: Equatable, Sendable {
        /// Its user is known: `place` it.
        case known(UserID)
        /// It waits for its user to be known; `identifyNow`: ask the bus about `sender` now.
        case waits(identifyNow: Bool)
        /// Refused at once, saying why.
        case refuse(String)
    }

    /// Takes an incoming call: its user is known, or it waits (bounded) until the bus says.
    public mutating func admit(_ call: Call, from sender: String) -> Admission {
        if let user = users[sender] { return .known(user) }
        var identifyNow = false
        if unidentified[sender] == nil {
            guard unidentifiedCount < limits.queuedCalls else {
                return .refuse("the service is busy identifying \(unidentifiedCount) callers")
            }
            unidentified[sender] = []
            if identifying < limits.identitiesInFlight {
                identifying += 1
                identifyNow = true
            } else {
                toIdentify.append(sender)
            }
        }
        guard unidentified[sender]!.count < limits.queuedCallsPerUser else {
            return .refuse("too many calls sent before the service could tell who sent them")
        }
        unidentified[sender]!.append(call)
        unidentifiedCount += 1
        return .waits(identifyNow: identifyNow)
    }

    /// What the bus said of a caller's user.
    public enum Identity: Equatable, Sendable {
        case user(UserID)
        /// The bus refused the request itself (too many of ours in flight): ask again.
        case busRefused
        /// No answer worth waiting for (the caller left): its calls are dropped.
        case unknown
    }

    /// What follows an identity answer: `calls` to `place` for `user` (or to drop, with no
    /// user), then the callers to ask about now.
    public struct Identified {
        public var user: UserID?
        public var calls: [Call] = []
        public var identifyNext: [String] = []
    }

    /// The bus answered who `sender` is.
    public mutating func identified(_ sender: String, _ answer: Identity) -> Identified {
        identifying -= 1
        var result = Identified()
        if answer == .busRefused, unidentified[sender] != nil {
            toIdentify.append(sender)
        } else if let calls = unidentified.removeValue(forKey: sender) {
            unidentifiedCount -= calls.count
            result.calls = calls
            if case .user(let user) = answer {
                users[sender] = user
                result.user = user
            }
        }
        while identifying < limits.identitiesInFlight, let next = toIdentify.popFirst() {
            // Gone meanwhile: its departure dropped its calls.
            guard unidentified[next] != nil else { continue }
            identifying += 1
            result.identifyNext.append(next)
        }
        return result
    }

    /// `caller` left the bus: its account closes. Returns the calls it had waiting for its
    /// identity (to drop), and whether what it left unread is worth giving memory back for.
    /// Its queued calls are dropped when their turn comes (no search now).
    public mutating func forget(_ caller: String) -> (dropped: [Call], trim: Bool) {
        users[caller] = nil
        let trim = ledger.forget(caller) >= limits.receiptAfter
        guard let calls = unidentified.removeValue(forKey: caller) else { return ([], trim) }
        unidentifiedCount -= calls.count
        return (calls, trim)
    }

    // MARK: Serving

    /// Whether the answers already made wait to be written: the socket is full.
    public func isWritingBehind(_ flow: some FlowGauge) -> Bool { flow.outgoingBytes > limits.outgoingBehind }

    /// Whether an incoming call waits its turn rather than being served at once: more calls
    /// have been read behind it, or the answers are not leaving.
    public func isFlooded(_ flow: some FlowGauge) -> Bool { flow.messagesWaiting || isWritingBehind(flow) }

    /// Whether messages the bus has sent wait to be read or dispatched (an answer may be
    /// among them).
    public func isReadingBehind(_ flow: some FlowGauge) -> Bool { flow.messagesWaiting || flow.bytesToRead > 0 }

    /// Where an identified call goes.
    public enum Placement: Equatable, Sendable {
        /// Its sender is not reading: dropped unanswered.
        case drop
        /// Nothing waits: served at once (the fast path).
        case serveNow
        /// Queued: serving is to be scheduled.
        case queued
        /// Refused, saying why (its user's share, or the queue, is full).
        case refuse(String)
    }

    /// Places a call of `user` from `sender` costing `cost` bytes.
    public mutating func place(_ call: Call, from sender: String, user: UserID, cost: Int,
                               flow: some FlowGauge) -> Placement {
        if dropsCalls(of: sender) { return .drop }
        if queue.isEmpty && !callsWait(of: user) && !isFlooded(flow) { return .serveNow }
        do {
            try queue.enqueue((call, sender), user: user, cost: cost)
        } catch {
            // Told why: it may well read (a peer that does not is stalled and never gets here).
            return .refuse("\(error); try again once the answers already sent have been read")
        }
        peakQueued = max(peakQueued, queue.count)
        return .queued
    }

    /// Whether a call from `sender` is dropped before it is even decoded: the sender is not
    /// reading (its read receipt is overdue).
    public func dropsUnread(from sender: String) -> Bool { dropsCalls(of: sender) }

    /// Whether `sender`'s calls are dropped unanswered: it is stalled, on a bus where that costs
    /// the service (`unreadCostsTheService`).
    func dropsCalls(of sender: String) -> Bool { unreadCostsTheService && ledger.isStalled(sender) }

    /// Whether `user`'s calls wait for a receipt: its peers have more than its share unread, on a
    /// bus where that costs the service.
    func callsWait(of user: UserID) -> Bool { Self.callsWait(of: user, ledger, unreadCostsTheService) }

    private static func callsWait(of user: UserID, _ ledger: OutputLedger, _ costsUs: Bool) -> Bool {
        costsUs && ledger.isBlocked(user)
    }

    /// Why a call from `sender` is refused before it is decoded, with its user (it would be
    /// queued, then refused): its user's share of the queue is used up.
    public func shareUsedUp(by sender: String) -> (user: UserID, reason: String)? {
        guard let user = users[sender], let full = queue.refusal(for: user) else { return nil }
        return (user, "\(full); try again once the answers already sent have been read")
    }

    /// The next step of serving queued calls; at most `limits.callsPerTurn` a turn.
    public enum Step {
        case serve(Call)
        /// Its caller left or stopped reading.
        case drop(Call)
        /// Nothing may be served until the socket can be written to: watch it.
        case waitForOutput
        /// Nothing to serve now; `trim`: a queue drained after a flood held memory worth
        /// giving back.
        case idle(trim: Bool)
    }

    /// The next queued call to serve, round-robin between users whose peers have read what
    /// they were sent; while answers wait to be written, each user once.
    public mutating func nextStep(_ flow: some FlowGauge) -> Step {
        let behind = isWritingBehind(flow)
        if !behind { servedWhileBehind = nil } else if servedWhileBehind == nil { servedWhileBehind = [] }
        let ledger = self.ledger, served = servedWhileBehind, costsUs = unreadCostsTheService
        guard let (user, next) = queue.next(where: {
            !Self.callsWait(of: $0, ledger, costsUs) && !(served?.contains($0) ?? false)
        })
        else {
            if behind && !queue.isEmpty { return .waitForOutput }
            if queue.isEmpty && peakQueued >= limits.trimAfterQueued {
                peakQueued = 0
                return .idle(trim: true)
            }
            return .idle(trim: false)
        }
        if users[next.sender] == nil || dropsCalls(of: next.sender) { return .drop(next.call) }
        servedWhileBehind?.insert(user)
        return .serve(next.call)
    }

    // MARK: Reading

    /// The next step of a dispatch turn, `dispatched` messages and `reads` reads ahead into it.
    public enum Dispatch: Equatable, Sendable {
        /// Dispatch the next message read.
        case dispatch
        /// Read what the bus has written (a flood: the call of another user may be behind it).
        case readAhead
        /// Nothing more this turn.
        case done
        /// The turn's batch is used up, with more to dispatch: come back next turn.
        case nextTurn
    }

    /// What a dispatch turn does next.
    public func dispatchStep(dispatched: Int, reads: Int, _ flow: some FlowGauge) -> Dispatch {
        guard dispatched < limits.dispatchBatch else { return .nextTurn }
        if flow.messagesWaiting { return .dispatch }
        guard dispatched >= limits.floodedAfter, reads < limits.readsPerTurn, flow.bytesToRead > 0 else { return .done }
        return .readAhead
    }

    /// The send buffer a connection asks for once it serves (bytes): a few answers, so that
    /// the line of answers waits in the outgoing queue, where `isWritingBehind` sees it.
    public var sendBuffer: Int { limits.sendBuffer }
}
