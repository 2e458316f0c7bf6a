import CDBus
import ReachabilityCore
import ReachabilityLoop

/// Refusals leave in turn, as answers do (`BusConnection+Flow`).
///
/// A flood past its user's share of the queue is refused (`LimitsExceeded`), and a call that
/// cannot be taken as read is refused before it is decoded (`InvalidArgs`: descriptors, size). Sent at once,
/// those refusals lined up in libdbus's outgoing queue — tens of thousands while the bus was
/// slow to read the service — ahead of another user's answer and of the service's own read
/// receipts: a victim's calls waited seconds there, its receipt timed out, and it was taken for
/// a peer that does not read. So a refusal is sent at once only while the answers already made
/// are leaving; otherwise it waits, a few dozen bytes (`LaterError`, no message), in its user's
/// turn, and leaves as the socket takes it. Its caller's window stays full meanwhile, so the
/// flood also sends less.
extension BusConnection {
    func scheduleServing() {
        guard callers.serveIdle == nil, callers.scheduler.hasWork else { return }
        callers.serveIdle = Sources.idle { [unowned self] in
            self.callers.serveIdle = nil
            self.serveQueued()
        }
    }

    /// Serves waiting calls, then sends waiting refusals with what room the socket has left:
    /// refusals after calls, or their line would keep the answers behind and serve each user
    /// only once.
    func serveQueued() {
        serveCalls()
        sendRefusals()
    }

    /// Answers `call` with `LimitsExceeded` saying `why`: now, or in its user's turn.
    func refuse(_ call: MethodCall, _ why: String) { refuse(call, with: .limitsExceeded(why)) }

    /// Answers `call` with `error`: now, or in its user's turn. Also the calls refused as
    /// they are read (descriptors attached, arguments too large or not decoded): sent at
    /// once, a flood of them lined up ahead of other users' answers as `LimitsExceeded` did.
    func refuse(_ call: MethodCall, with error: BusError) {
        guard callers.scheduler.refusalWaits(flow) else { return call.fail(error) }
        guard let later = call.answerLater(error) else { return }
        refuse(later, user: callers.scheduler.user(of: call.sender))
    }

    /// Refuses the call in `message` from `sender` before it is decoded, when its user's share of
    /// the queue is used up (it would be queued, then refused): a flood past its share costs a
    /// lookup and a few dozen bytes a call. Returns whether it did.
    func refuseIfFull(_ message: OpaquePointer, from sender: String) -> Bool {
        guard let (user, why) = callers.scheduler.shareUsedUp(by: sender) else { return false }
        guard dbus_message_get_no_reply(message) == 0 else { return true }
        let error = BusError.limitsExceeded(why)
        refuse(LaterError(destination: sender, serial: dbus_message_get_serial(message), error: error), user: user)
        return true
    }

    private func refuse(_ later: LaterError, user: UserID?) {
        guard callers.scheduler.refusalWaits(flow) else { return sendRefusal(later) }
        // Past even the queue's bound: at once, as before.
        guard callers.scheduler.queueRefusal(later, user: user, cost: later.size) else { return sendRefusal(later) }
        scheduleServing()
    }

    /// Sends waiting refusals while the answers leave, round-robin between users; comes back
    /// when the socket can be written to, or in the next turn.
    func sendRefusals() {
        var sent = 0
        while let later = callers.scheduler.nextRefusal(sent: sent, flow) {
            sendRefusal(later)
            sent += 1
        }
        switch callers.scheduler.refusalsEnded(sent: sent, flow) {
        case .drained(let trim):
            // A line of refusals that has drained held memory worth giving back.
            if trim { Memory.trimSoon() }
        case .waitForOutput:
            if !waitForOutput() { scheduleServing() }
        case .nextTurn:
            scheduleServing()
        }
    }

    private func sendRefusal(_ later: LaterError) {
        guard let reply = later.message() else { return }
        defer { dbus_message_unref(reply) }
        send(reply, to: later.destination, size: later.size)
    }
}
