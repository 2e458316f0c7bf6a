import Logging
import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop

/// The system bus itself leaving and coming back (`systemctl restart dbus`, an upgrade of
/// the broker): the connection is lost, every target is unknown, and the service, which
/// exits with its bus, is gone too. While something is held, the client connects again —
/// the first attempt after `restartFirstWait`, each next one after twice the wait of the
/// one before, at most `restartCap` apart, never giving up — and on the new bus follows the
/// service's name as at start: a service already there is asked for every hold again, one
/// not there yet is started (`DaemonBackend+Owner.swift`). Nothing waits while nothing is
/// held; a subscriber that comes later starts the attempts again.
extension DaemonBackend {
    /// A private connection to the system bus.
    static func connect(logger: Logger) throws(ReachabilityError) -> BusConnection {
        do {
            return try BusConnection(.system, logger: logger)
        } catch {
            throw .serviceUnavailable(error.message)
        }
    }

    /// The connection's `Disconnected`: called while the old connection dispatches, so the
    /// connection is kept until the attempt that replaces it (a connection must not end
    /// inside its own dispatch).
    func disconnected() {
        logger.error("disconnected from the system bus")
        isDisconnected = true
        // Queued calls were for holds on the old bus: the new one is asked afresh.
        queuedCalls = Ring()
        callsInFlight = 0
        ownerChanged("")
        scheduleReconnect()
    }

    /// The next attempt to connect, after its wait, while something is held.
    func scheduleReconnect() {
        guard isDisconnected, reconnectTimer == nil, isHolding else { return }
        reconnectTimer = Sources.after(milliseconds: Self.backoff(after: reconnectAttempts)) { [weak self] in self?.reconnect() }
    }

    private func reconnect() {
        reconnectTimer = nil
        guard isDisconnected, isHolding else { return }
        reconnectAttempts += 1
        let next: BusConnection
        do {
            next = try Self.connect(logger: logger)
        } catch {
            let message = "the system bus is not back yet (attempt \(reconnectAttempts)): \(error)"
            if reconnectAttempts <= Self.restartAttemptsMax { logger.info("\(message)") } else { logger.debug("\(message)") }
            return scheduleReconnect()
        }
        logger.info("connected to the system bus again (attempt \(reconnectAttempts))")
        ownerWatch = nil
        signals = nil
        connection = next
        isDisconnected = false
        reconnectAttempts = 0
        isOwnerKnown = false
        follow(again: true)
    }

    /// What the new bus's driver says of the service's name, once connected again: there, every
    /// hold is asked for again; away (it exited with the old bus), the bus is asked to start it.
    func ownerChangedOnNewBus(_ owner: String) {
        if owner.isEmpty {
            restartAttempts = 0
            outageAttempts = 0
            scheduleRestart()
        } else {
            ownerChanged(owner)
        }
    }
}
