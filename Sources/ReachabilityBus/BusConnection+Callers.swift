import CDBus
import Logging
import ReachabilityCore
import ReachabilityFairness
import ReachabilityLoop

/// The callers of a service connection, as the connection's glue holds them: the
/// scheduler that decides (`CallScheduler`: who each caller is, what waits, what each has
/// not read), and the loop's sources it asked for.
///
/// Every incoming call is served in round-robin order between users: it runs at once while
/// nothing waits, and otherwise after at most one call of every other user with calls
/// waiting. A user whose peers do not read what they are sent waits; a peer that has stopped
/// reading has its calls dropped; one that leaves the bus has its waiting calls dropped and
/// its account closed.
@LoopActor
final class Callers {
    var scheduler: CallScheduler<MethodCall, LaterError>
    var serveIdle: SourceHandle?
    /// Receipts to ask for again later, by peer.
    var retries: [String: SourceHandle] = [:]

    init(limits: Limits) {
        scheduler = CallScheduler(limits: limits, now: { UInt64(MonotonicClock.microseconds()) })
    }

    func drop(_ call: MethodCall) { call.abandon() }
}

extension BusConnection {
    // MARK: Admission

    /// Takes an incoming call: finds out who sent it, then serves it in its user's turn.
    func admit(_ call: MethodCall) {
        switch callers.scheduler.admit(call, from: call.sender) {
        case .known(let user): enqueue(call, user: user)
        case .waits(let identifyNow): if identifyNow { identify(call.sender) }
        case .refuse(let why): refuse(call, why)
        }
    }

    /// Asks the bus driver for the Unix user of `sender` (`GetConnectionUnixUser`), once per caller.
    private func identify(_ sender: String) {
        callAsync(destination: Self.busDriver, path: ObjectPath("/org/freedesktop/DBus"),
                  interface: "org.freedesktop.DBus", member: "GetConnectionUnixUser", [.string(sender)]) {
            [weak self] result in
            guard let self else { return }
            let answer: CallScheduler<MethodCall, LaterError>.Identity
            switch result {
            case .success(let values):
                if case .uint32(let user)? = values.first { answer = .user(user) } else { answer = .unknown }
            case .failure(let error):
                // The bus refused the request itself (too many of ours in flight), or the
                // caller has left (NameHasNoOwner): nobody waits for the answers.
                answer = error.name == BusError.prefix + "LimitsExceeded" ? .busRefused : .unknown
            }
            let next = self.callers.scheduler.identified(sender, answer)
            for call in next.calls {
                if let user = next.user { self.enqueue(call, user: user) } else { self.callers.drop(call) }
            }
            for sender in next.identifyNext { self.identify(sender) }
        }
    }

    private func enqueue(_ call: MethodCall, user: UserID) {
        call.user = user
        switch callers.scheduler.place(call, from: call.sender, user: user, cost: call.cost, flow: flow) {
        case .drop: callers.drop(call)
        case .serveNow: Dispatcher.dispatch(call, in: tree)
        case .queued: scheduleServing()
        case .refuse(let why): refuse(call, why)
        }
    }

    /// Whether a call from `sender` is to be dropped before it is even decoded: the sender
    /// is not reading (its read receipt is overdue).
    func shouldDropUnread(from sender: String) -> Bool { callers.scheduler.dropsUnread(from: sender) }

    /// Serves a bounded batch of waiting calls, as the scheduler picks them.
    func serveCalls() {
        for _ in 0..<limits.callsPerTurn {
            switch callers.scheduler.nextStep(flow) {
            case .serve(let call): Dispatcher.dispatch(call, in: tree)
            case .drop(let call): callers.drop(call)
            case .waitForOutput:
                // With no socket to watch (not expected of a bus connection) it is the same.
                _ = waitForOutput()
                return
            case .idle(let trim):
                if trim { Memory.trimSoon() }
                return
            }
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
        let (dropped, trim) = callers.scheduler.forget(caller)
        // What it left unread was freed with its messages: worth giving back after a flood.
        if trim { Memory.trimSoon() }
        callers.retries[caller] = nil
        tree.forgetWithheld(caller)
        for call in dropped { callers.drop(call) }
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
        guard case .send(let askReceipts) = callers.scheduler.sending(size, to: destination) else { return }
        send(message)
        for peer in askReceipts { askReceipt(from: peer) }
    }

    /// Does what the scheduler decided of a receipt.
    private func apply(_ verdict: CallScheduler<MethodCall, LaterError>.Verdict) {
        switch verdict {
        case .nothing:
            break
        case .changed(let peer, let askAgain, let trim):
            if askAgain { askReceipt(from: peer) }
            if trim { Memory.trimSoon() }
            // Its waiting calls may be served, and what it was not sent while behind is sent now.
            tree.resume(peer)
            scheduleServing()
        case .retry(let peer, let after):
            // Whole seconds: GLib's coarse timer, which wakes with the others due that second.
            callers.retries[peer] = Sources.every(seconds: UInt32(clamping: max(1, after / 1_000_000))) { [unowned self] in
                self.callers.retries[peer] = nil
                self.askReceipt(from: peer)
                return false
            }
        case .receiptsForbidden:
            logger.warning("""
                the bus does not let the service ask its callers for read receipts (Peer.Ping); \
                install its D-Bus policy file: until then a caller that does not read its \
                socket can make the bus stop reading the service
                """)
            for peer in Array(tree.withheld.keys) { tree.resume(peer) }
            scheduleServing()
        case .queueStatsUnavailable:
            break  // Receipts alone from now on (said where the bus refused).
        }
    }

    /// Learns whom the bus charges for what waits for a reader (`CallScheduler.unreadCostsTheService`):
    /// dbus-broker, the reader — it answers `GetStats` with figures of its own, named
    /// `org.bus1.DBus.Debug.Stats.…`; dbus-daemon, the service. Asked once, before the service
    /// takes its name, and said once in the log: what the bus is, and what the service does
    /// there. The shipped policy lets the service's own user ask (the stock system.conf lets
    /// only root); a bus that refuses (an older policy file) or does not answer is taken for
    /// dbus-daemon, the safe guess, and the log says why.
    func learnWhoPaysForUnread() {
        let values: [DBusValue]
        do {
            values = try call(destination: Self.busDriver, path: ObjectPath("/org/freedesktop/DBus"),
                              interface: "org.freedesktop.DBus.Debug.Stats", member: "GetStats",
                              timeoutMilliseconds: 5_000)
        } catch {
            callers.scheduler.unreadCostsTheService = true
            return logger.notice("""
                the bus does not say which bus it is (GetStats: \(error.name): \(error.message)); taking it \
                for dbus-daemon, which charges what waits for a reader to the service: a caller that leaves \
                much unread is asked for read receipts, and its user's calls wait for them (on dbus-broker \
                that would stall blocking callers: install this version's D-Bus policy file, which lets \
                the service ask)
                """)
        }
        guard case .dictionary(_, _, let all)? = values.first else {
            callers.scheduler.unreadCostsTheService = true
            return logger.notice("the bus answered GetStats with '\(values.signature)'; taking it for dbus-daemon")
        }
        let broker = all.contains { entry in
            if case .string(let key) = entry.key { return key.hasPrefix("org.bus1.") }
            return false
        }
        callers.scheduler.unreadCostsTheService = !broker
        if broker {
            logger.info("""
                the bus is dbus-broker, which charges what waits for a reader to the reader: a caller \
                that does not read costs only itself, and its calls are answered as anyone's
                """)
        } else {
            logger.info("""
                the bus is dbus-daemon, which charges what waits for a reader to the service: a caller \
                that leaves much unread is asked for read receipts, and its user's calls wait for them
                """)
        }
    }

    /// Sends `peer` a `Peer.Ping`: its answer (any answer from the peer itself) means it
    /// has read everything sent to it before. Wraps `dbus_connection_send_with_reply`.
    private func askReceipt(from peer: String) {
        guard let id = callers.scheduler.receipt(of: peer),
            let ping = dbus_message_new_method_call(peer, "/", "org.freedesktop.DBus.Peer", "Ping")
        else { return }
        defer { dbus_message_unref(ping) }
        var pending: OpaquePointer?
        guard dbus_connection_send_with_reply(raw, ping, &pending, Int32(clamping: callers.scheduler.receiptTimeout / 1000)) != 0,
            let pending
        else { return }
        askQueue(of: peer, receipt: id)
        let box = Unmanaged.passRetained(ReceiptBox(connection: self, peer: peer, receipt: id)).toOpaque()
        dbus_pending_call_set_notify(pending, ReceiptBox.notify, box, ReceiptBox.release)
        dbus_pending_call_unref(pending)
    }

    /// Asks the bus what it still holds for `peer` (`GetConnectionStats`), right after
    /// receipt `id`: nothing held means the peer read what the receipt covers.
    private func askQueue(of peer: String, receipt id: UInt64) {
        guard callers.scheduler.asksQueueStats else { return }
        callAsync(destination: Self.busDriver, path: ObjectPath("/org/freedesktop/DBus"),
                  interface: "org.freedesktop.DBus.Debug.Stats", member: "GetConnectionStats", [.string(peer)]) {
            [weak self] result in
            guard let self else { return }
            let stats: CallScheduler<MethodCall, LaterError>.QueueStats
            switch result {
            case .success(let values):
                guard case .dictionary(_, _, let all)? = values.first,
                    case .variant(.uint32(let queued))? = all.first(where: { $0.key == .string("OutgoingBytes") })?.value
                else { return }
                stats = .holds(Int(queued))
            case .failure(let error):
                switch error.name {
                case BusError.prefix + "LimitsExceeded", BusError.noReply, BusError.prefix + "NameHasNoOwner":
                    stats = .busy
                default:
                    // Not allowed by the bus's policy, or not this bus's (dbus-broker has no such
                    // statistic, and charges what waits for a reader to the reader): receipts alone.
                    self.logger.info("""
                        the bus does not tell the service what it holds for a caller (\(error.name): \
                        \(error.message)); a caller that reads without answering read receipts \
                        waits for their timeout once its user has much unread
                        """)
                    stats = .unavailable
                }
            }
            self.apply(self.callers.scheduler.queueStats(of: peer, receipt: id, stats))
        }
    }

    fileprivate func receiptAnswered(by peer: String, receipt id: UInt64, reply: OpaquePointer?) {
        let isError = reply.map { dbus_message_get_type($0) == DBUS_MESSAGE_TYPE_ERROR } ?? true
        let from = reply.flatMap(Self.sender(of:))
        let name = reply.flatMap { dbus_message_get_error_name($0) }.map { String(cString: $0) }
        let outcome: CallScheduler<MethodCall, LaterError>.ReceiptReply
        if !isError || from == peer {
            outcome = .answered  // An error from the peer itself counts: it read the Ping.
        } else {
            switch name {
            case BusError.prefix + "AccessDenied": outcome = .forbidden
            case BusError.noReply, nil: outcome = .timedOut
            case BusError.prefix + "LimitsExceeded":
                // Its queue in the bus is full, or the bus holds too many of our own calls
                // awaiting replies (the bus answers at once either way).
                let message = reply.flatMap { MessageCodec.decodeBody($0)?.first?.stringValue } ?? ""
                outcome = .refused(oursToo: message.contains("pending replies"))
            default: outcome = .gone  // ServiceUnknown, NameHasNoOwner: its departure closes its account.
            }
        }
        let verdict = callers.scheduler.receiptAnswered(by: peer, receipt: id, outcome, flow: flow)
        if outcome == .timedOut, case .changed(_, true, _) = verdict {
            logger.debug("\(peer) did not answer a read receipt; its calls are dropped while it owes one")
        }
        apply(verdict)
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
