import CDBus
import Logging
import ReachabilityCore
import ReachabilityLoop

/// The callers of a service connection: who each is (its Unix user), the calls
/// waiting their turn, and what each has been sent and not read.
///
/// Every incoming call is served in round-robin order between users
/// (`FairQueue`): it runs at once while nothing waits, and otherwise after at
/// most one call of every other user with calls waiting. A user whose peers do
/// not read what they are sent waits (`OutputLedger`); a peer that has stopped
/// reading has its calls dropped; one that leaves the bus has its waiting calls
/// dropped and its account closed.
@LoopActor
final class Callers {
    /// The connection's bounds (docs/hardening.md, "Flow and fairness limits").
    let limits: Limits
    /// The Unix user of each caller still on the bus, by unique name.
    var users: [String: UserID] = [:]
    /// Calls from callers whose user is being asked for, by unique name.
    var unidentified: [String: [MethodCall]] = [:]
    var unidentifiedCount = 0
    /// Identity requests in flight, and the callers waiting to be asked about.
    var identifying = 0
    var toIdentify = Ring<String>()
    var queue: FairQueue<MethodCall>
    var ledger: OutputLedger
    /// Whether the bus lets the service ask peers for read receipts (its policy may not).
    var receiptsAllowed = true
    /// Whether the bus tells the service what it holds for a peer (`GetConnectionStats`:
    /// dbus-daemon, where the policy allows it).
    var queueStatsAllowed = true
    var serveIdle: SourceHandle?
    /// The most calls queued since the queue last drained after a flood.
    var peakQueued = 0
    /// The users served since answers began to wait to be written (`nil`: they do not).
    var servedWhileBehind: Set<UserID>?
    /// Receipts to ask for again later, by peer (its queue in the bus was full).
    var retries: [String: SourceHandle] = [:]

    init(limits: Limits) {
        self.limits = limits
        queue = FairQueue(limits: limits.callQueue())
        ledger = limits.ledger()
        refusals = FairQueue(limits: limits.refusalQueue())
    }

    func drop(_ call: MethodCall) { call.abandon() }

    /// Refusals not sent yet, round-robin between users (see `BusConnection.refuse`).
    var refusals: FairQueue<LaterError>
    var refusalsPeak = 0
}

extension BusConnection {
    // MARK: Admission

    /// Takes an incoming call: finds out who sent it, then serves it in its user's turn.
    func admit(_ call: MethodCall) {
        if let user = callers.users[call.sender] { return enqueue(call, user: user) }
        if callers.unidentified[call.sender] == nil {
            guard callers.unidentifiedCount < callers.limits.queuedCalls else {
                return refuse(call, "the service is busy identifying \(callers.unidentifiedCount) callers")
            }
            callers.unidentified[call.sender] = []
            requestIdentity(of: call.sender)
        }
        guard callers.unidentified[call.sender]!.count < callers.limits.queuedCallsPerUser else {
            return refuse(call, "too many calls sent before the service could tell who sent them")
        }
        callers.unidentified[call.sender]!.append(call)
        callers.unidentifiedCount += 1
    }

    /// Asks for `sender`'s identity now, or once fewer requests are in flight.
    private func requestIdentity(of sender: String) {
        guard callers.identifying < callers.limits.identitiesInFlight else { return callers.toIdentify.append(sender) }
        callers.identifying += 1
        identify(sender)
    }

    /// Asks the bus driver for the Unix user of `sender` (`GetConnectionUnixUser`), once per caller.
    private func identify(_ sender: String) {
        callAsync(destination: Self.busDriver, path: ObjectPath("/org/freedesktop/DBus"),
                  interface: "org.freedesktop.DBus", member: "GetConnectionUnixUser", [.string(sender)]) {
            [weak self] result in
            guard let self else { return }
            self.callers.identifying -= 1
            defer { self.identifyWaiting() }
            if case .failure(let error) = result, error.name == BusError.prefix + "LimitsExceeded",
                self.callers.unidentified[sender] != nil
            {
                // The bus refused the request itself (too many of ours in flight): ask again.
                return self.callers.toIdentify.append(sender)
            }
            guard let calls = self.callers.unidentified.removeValue(forKey: sender) else { return }
            self.callers.unidentifiedCount -= calls.count
            guard case .success(let values) = result, case .uint32(let user)? = values.first else {
                // The caller has left (NameHasNoOwner): nobody waits for the answers.
                for call in calls { self.callers.drop(call) }
                return
            }
            self.callers.users[sender] = user
            for call in calls { self.enqueue(call, user: user) }
        }
    }

    /// Starts the identity requests that waited, as many as may be in flight.
    private func identifyWaiting() {
        while callers.identifying < callers.limits.identitiesInFlight, let sender = callers.toIdentify.popFirst() {
            // Gone meanwhile: its departure dropped its calls.
            guard callers.unidentified[sender] != nil else { continue }
            callers.identifying += 1
            identify(sender)
        }
    }

    private func enqueue(_ call: MethodCall, user: UserID) {
        call.user = user
        if callers.ledger.isStalled(call.sender) { return callers.drop(call) }
        // The common case: nothing waits, so nothing is queued.
        if callers.queue.isEmpty && !callers.ledger.isBlocked(user) && !isFlooded {
            return Dispatcher.dispatch(call, in: tree)
        }
        do {
            try callers.queue.enqueue(call, user: user, cost: call.cost)
            callers.peakQueued = max(callers.peakQueued, callers.queue.count)
        } catch {
            // Told why: it may well read (a peer that does not is stalled and never gets here).
            return refuse(call, "\(error); try again once the answers already sent have been read")
        }
        scheduleServing()
    }

    /// Whether a call from `sender` is to be dropped before it is even decoded: the sender
    /// is not reading (its read receipt is overdue).
    func shouldDropUnread(from sender: String) -> Bool { callers.ledger.isStalled(sender) }

    /// Serves a bounded batch of waiting calls, round-robin between users whose
    /// peers have read what they were sent.
    func serveCalls() {
        for _ in 0..<callers.limits.callsPerTurn {
            // While answers wait to be written, each user is served once: a user who just came
            // is not made to wait for the line the others' answers made.
            let behind = isWritingBehind
            if !behind { callers.servedWhileBehind = nil } else if callers.servedWhileBehind == nil {
                callers.servedWhileBehind = []
            }
            let ledger = callers.ledger, served = callers.servedWhileBehind
            guard let (user, call) = callers.queue.next(where: {
                !ledger.isBlocked($0) && !(served?.contains($0) ?? false)
            }) else {
                if behind && !callers.queue.isEmpty && waitForOutput() { return }
                // A queue that has drained after a flood held memory worth giving back.
                if callers.queue.isEmpty && callers.peakQueued >= callers.limits.trimAfterQueued {
                    callers.peakQueued = 0
                    Memory.trimSoon()
                }
                return
            }
            if callers.users[call.sender] == nil || callers.ledger.isStalled(call.sender) {
                callers.drop(call)
                continue
            }
            callers.servedWhileBehind?.insert(user)
            Dispatcher.dispatch(call, in: tree)
        }
        scheduleServing()
    }

    // MARK: Departures

    /// Follows callers leaving the bus (`NameOwnerChanged` with no new owner; `arg2=''`
    /// keeps the others away): their waiting calls and accounts go, then `handlers` run.
    /// Installed before the connection asks for its name, so no caller can leave unseen.
    func trackDepartures() {
        guard !departuresTracked else { return }
        departuresTracked = true
        dbus_bus_add_match(
            raw, "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',"
                + "member='NameOwnerChanged',path='/org/freedesktop/DBus',arg2=''", nil)
        addSignalHandler { [unowned self] message in
            // Only the bus driver's word counts: a peer can send anyone a signal of this name.
            guard dbus_message_is_signal(message, "org.freedesktop.DBus", "NameOwnerChanged") != 0,
                Self.sender(of: message) == Self.busDriver,
                let args = MessageCodec.decodeBody(message), args.signature == "sss",
                let name = args[0].stringValue, let old = args[1].stringValue, let new = args[2].stringValue,
                new.isEmpty
            else { return }
            if name.hasPrefix(":") { self.forget(name) }
            for handler in self.departureHandlers { handler(name, old, new) }
        }
    }

    private func forget(_ caller: String) {
        callers.users[caller] = nil
        // What it left unread was freed with its messages: worth giving back after a flood.
        if callers.ledger.forget(caller) >= callers.limits.receiptAfter { Memory.trimSoon() }
        callers.retries[caller] = nil
        tree.forgetWithheld(caller)
        if let calls = callers.unidentified.removeValue(forKey: caller) {
            callers.unidentifiedCount -= calls.count
            for call in calls { callers.drop(call) }
        }
        // Its queued calls are dropped when their turn comes (no O(n) search now);
        // its account being closed may unblock its user's other connections.
        scheduleServing()
    }

    // MARK: Output

    /// Sends a message to `destination` (`nil`: a broadcast signal), charging
    /// about `size` bytes to the destination's account until it reads them. Signals to a
    /// peer that has fallen behind never get here: the object tree keeps them as changes.
    func send(_ message: OpaquePointer, to destination: String?, size: Int) {
        // A peer that is not reading (its receipt is overdue) is sent nothing more: what it does
        // not read stays charged to the service in the bus (dbus-daemon), until the bus stops
        // reading the service for everybody.
        if let destination, callers.ledger.isStalled(destination) { return }
        send(message)
        guard callers.receiptsAllowed, let destination, let user = callers.users[destination] else { return }
        for peer in callers.ledger.sent(size, to: destination, user: user) { askReceipt(from: peer) }
    }

    /// The ledger changed for `peer` (it read, or was forgiven): its waiting calls may be
    /// served, and what it was not sent while behind is sent now.
    private func ledgerChanged(for peer: String) {
        tree.resume(peer)
        scheduleServing()
    }

    /// Sends `peer` a `Peer.Ping`: its answer (any answer from the peer itself) means it
    /// has read everything sent to it before. Wraps `dbus_connection_send_with_reply`.
    private func askReceipt(from peer: String) {
        guard let id = callers.ledger.receipt(of: peer),
            let ping = dbus_message_new_method_call(peer, "/", "org.freedesktop.DBus.Peer", "Ping")
        else { return }
        defer { dbus_message_unref(ping) }
        var pending: OpaquePointer?
        guard dbus_connection_send_with_reply(raw, ping, &pending, Int32(callers.limits.receiptTimeout)) != 0, let pending else {
            return
        }
        askQueue(of: peer, receipt: id)
        let box = Unmanaged.passRetained(ReceiptBox(connection: self, peer: peer, receipt: id)).toOpaque()
        dbus_pending_call_set_notify(pending, ReceiptBox.notify, box, ReceiptBox.release)
        dbus_pending_call_unref(pending)
    }

    /// Asks the bus what it still holds for `peer` (`GetConnectionStats`), right after
    /// receipt `id`: nothing held means the peer read what the receipt covers.
    private func askQueue(of peer: String, receipt id: UInt64) {
        guard callers.queueStatsAllowed else { return }
        callAsync(destination: Self.busDriver, path: ObjectPath("/org/freedesktop/DBus"),
                  interface: "org.freedesktop.DBus.Debug.Stats", member: "GetConnectionStats", [.string(peer)]) {
            [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let values):
                guard case .dictionary(_, _, let stats)? = values.first,
                    case .variant(.uint32(let queued))? = stats.first(where: { $0.key == .string("OutgoingBytes") })?.value
                else { return }
                guard queued == 0, self.callers.users[peer] != nil else { return }
                self.receiptProven(by: peer, receipt: id)
            case .failure(let error):
                switch error.name {
                case BusError.prefix + "LimitsExceeded", BusError.noReply, BusError.prefix + "NameHasNoOwner":
                    break  // Too many of our calls in flight, or the peer left: the receipt still counts.
                default:
                    // Not allowed by the bus's policy, or not this bus's (dbus-broker has no such
                    // statistic, and charges what waits for a reader to the reader): receipts alone.
                    self.logger.info("""
                        the bus does not tell the service what it holds for a caller (\(error.name): \
                        \(error.message)); a caller that reads without answering read receipts \
                        waits for their timeout once its user has much unread
                        """)
                    self.callers.queueStatsAllowed = false
                }
            }
        }
    }

    /// `peer` read everything receipt `id` covers (it answered, or the bus holds nothing for it).
    private func receiptProven(by peer: String, receipt id: UInt64) {
        // What it read has been written and freed, which after a large reply is worth giving back.
        let before = callers.ledger.unread(by: callers.users[peer] ?? 0)
        if callers.ledger.receiptArrived(from: peer, receipt: id) { askReceipt(from: peer) }
        if before - callers.ledger.unread(by: callers.users[peer] ?? 0) >= callers.limits.trimAfterRead { Memory.trimSoon() }
        ledgerChanged(for: peer)
    }

    fileprivate func receiptAnswered(by peer: String, receipt id: UInt64, reply: OpaquePointer?) {
        let isError = reply.map { dbus_message_get_type($0) == DBUS_MESSAGE_TYPE_ERROR } ?? true
        let from = reply.flatMap(Self.sender(of:))
        if !isError || from == peer {
            // The peer answered (an error from the peer itself counts: it read the Ping).
            return receiptProven(by: peer, receipt: id)
        }
        let name = reply.flatMap { dbus_message_get_error_name($0) }.map { String(cString: $0) }
        switch name {
        case BusError.prefix + "AccessDenied":
            // The bus's policy forbids it: no receipts, so no accounting of what peers read.
            logger.warning("""
                the bus does not let the service ask its callers for read receipts (Peer.Ping); \
                install its D-Bus policy file: until then a caller that does not read its \
                socket can make the bus stop reading the service
                """)
            callers.receiptsAllowed = false
            callers.ledger = callers.limits.ledger()
            for peer in Array(tree.withheld.keys) { tree.resume(peer) }
            scheduleServing()
        case BusError.noReply, nil:
            // Not answered within the timeout: not reading, or reading without answering.
            let now = UInt64(MonotonicClock.microseconds())
            guard callers.users[peer] != nil else { return }
            // Unless the answer may still wait behind what the bus wrote to the service (another
            // user's flood): a flood's victim was taken for a non-reader, and its calls dropped
            // until its next receipt came through the same queue. Asked again a second later.
            if isReadingBehind { return retryReceipt(of: peer, seconds: callers.limits.receiptRetry) }
            if callers.ledger.receiptLost(from: peer, receipt: id, now: now) {
                logger.debug("\(peer) did not answer a read receipt; its calls are dropped while it owes one")
                askReceipt(from: peer)
            }
            ledgerChanged(for: peer)
        case BusError.prefix + "LimitsExceeded":
            // Its queue in the bus is full, or the bus holds too many of our own calls awaiting
            // replies (the bus answers at once either way): ask again a little later, not in a
            // loop. Only the first says anything about the peer.
            let now = UInt64(MonotonicClock.microseconds())
            guard callers.users[peer] != nil else { return }
            let message = reply.flatMap { MessageCodec.decodeBody($0)?.first?.stringValue } ?? ""
            let oursToo = message.contains("pending replies")
            if !oursToo && !callers.ledger.receiptLost(from: peer, receipt: id, now: now) {
                return ledgerChanged(for: peer)
            }
            retryReceipt(of: peer,
                         seconds: oursToo ? callers.limits.receiptRetry : callers.limits.receiptRetryQueueFull)
        default:
            break  // It left (ServiceUnknown, NameHasNoOwner): its departure closes its account.
        }
    }

    /// Asks `peer` for its receipt again in `seconds`, not in a loop.
    private func retryReceipt(of peer: String, seconds: Int) {
        callers.retries[peer] = Sources.every(seconds: UInt32(seconds)) { [unowned self] in
            self.callers.retries[peer] = nil
            self.askReceipt(from: peer)
            return false
        }
    }
}

/// What a read receipt's reply needs: the connection (weak: a receipt may outlive
/// it) and the peer asked.
private final class ReceiptBox {
    weak var connection: BusConnection?
    let peer: String
    let receipt: UInt64
    @LoopActor init(connection: BusConnection, peer: String, receipt: UInt64) {
        self.connection = connection
        self.peer = peer
        self.receipt = receipt
    }

    /// The Ping ended; entered on the loop as `ReplyBox.notify` is.
    static let notify: DBusPendingCallNotifyFunction = { pending, data in
        let box = Unmanaged<ReceiptBox>.fromOpaque(data!).takeUnretainedValue()
        LoopActor.assumeIsolated((box, dbus_pending_call_steal_reply(pending))) { box, reply in
            defer { if let reply { dbus_message_unref(reply) } }
            box.connection?.receiptAnswered(by: box.peer, receipt: box.receipt, reply: reply)
        }
    }

    static let release: DBusFreeFunction = { data in Unmanaged<ReceiptBox>.fromOpaque(data!).release() }
}
