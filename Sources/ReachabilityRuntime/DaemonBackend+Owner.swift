import Glibc
import Logging
import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop

/// The service's name on the bus, as the daemon client follows it: whether the daemon
/// is there (which decides, once per process, whether answers come from it), and what
/// happens when it leaves. A daemon that leaves makes every target unknown; while
/// anything is held, the bus is asked to start it again (fast attempts with backoff, then
/// one every `restartCap`, for as long as something is held and the service is away); when
/// it (or a new instance) comes back, every target is watched again and updates resume.
extension DaemonBackend {
    /// The fast attempts to start the service again (since it was last up for
    /// `restartSettle`): after each departure the first comes after 0.5 s, and each next one
    /// of the same absence after twice the wait of the one before it (1 s, 2 s, 4 s, 8 s,
    /// 16 s: about 30 s in all for a service that does not come back). Not at once: a
    /// `systemctl stop` is still finishing when the name goes, and systemd cancels that stop
    /// job ("Job … canceled") when a start of the unit is asked before it is done. After
    /// them the client never gives up: it follows the name (`NameOwnerChanged`) and asks
    /// again every `restartCap` (the bus may start it again once the administrator has
    /// unmasked the unit or reinstalled the package), while something is held.
    static let restartAttemptsMax = 6
    static let restartFirstWait: UInt32 = 500
    /// The longest wait between two attempts: 30 s, or `REACHABILITY_RESTART_CAP` seconds
    /// (at least 1; for tests and for programs that would rather hear the service back
    /// sooner). A timer exists only while something is held and the service is away.
    nonisolated static let restartCap: UInt32 = {
        guard let text = getenv("REACHABILITY_RESTART_CAP").map({ String(cString: $0) }),
            let seconds = UInt32(text), seconds >= 1, seconds <= 3600
        else { return 30_000 }
        return seconds * 1000
    }()
    /// A service that kept its name this long before it left was up: the attempts start from
    /// the first again. One that leaves sooner (it fails soon after its start) continues the
    /// backoff, so a service that keeps failing is never started in a loop.
    static let restartSettle: Int64 = 10_000_000

    /// Calls the bus driver; `reply` gets the reply's first value (`nil`: an error).
    func driver(_ member: String, _ arguments: [DBusValue] = [], timeoutMilliseconds: Int32 = 2000,
                reply: @escaping (Result<DBusValue?, BusError>) -> Void) {
        connection.callAsync(destination: "org.freedesktop.DBus", path: ObjectPath("/org/freedesktop/DBus"),
                             interface: "org.freedesktop.DBus", member: member, arguments,
                             timeoutMilliseconds: timeoutMilliseconds) { reply($0.map(\.first)) }
    }

    /// Whether the bus can start the service (`ListActivatableNames`), without waiting.
    func isActivatable(_ done: @escaping (Bool) -> Void) {
        driver("ListActivatableNames") { names in
            guard case .success(.array(_, let names)?) = names else { return done(false) }
            done(names.contains(.string(ServiceNames.busName)))
        }
    }

    /// Whether the daemon runs, or the bus can start it, without waiting: its owner as the
    /// bus driver told it when this client began to follow the name (no call of its own);
    /// the activatable names when it has none.
    func isServiceAvailable(_ done: @escaping (Bool) -> Void) {
        guard isOwnerKnown else { return ownerWaiters.append { [unowned self] in self.isServiceAvailable(done) } }
        if !owner.isEmpty { return done(true) }
        isActivatable(done)
    }

    /// The driver's answer to `GetNameOwner`, asked when the name began to be followed.
    func ownerKnown(_ owner: String) {
        self.owner = owner
        isOwnerKnown = true
        let waiting = ownerWaiters
        ownerWaiters = []
        for work in waiting { work() }
    }

    /// The service took the name (`owner`), or left it (`""`).
    func ownerChanged(_ owner: String) {
        let now = MonotonicClock.microseconds()
        if owner.isEmpty {
            logger.info("\(ServiceNames.busName) left the system bus; targets are unknown until it is back")
            if now - ownedSince >= Self.restartSettle { restartAttempts = 0 }
            outageAttempts = 0
        } else {
            logger.debug("\(ServiceNames.busName) is on the system bus as \(owner)")
            ownedSince = now
            restartTimer = nil
            saidNotActivatable = false
        }
        self.owner = owner
        if let watch = pathWatch {
            watch.forget()
            if owner.isEmpty {
                // The daemon left: no path until it is back.
                watch.isAnswer = true
                watch.feed.publish(.none, isAnswer: true)
            } else {
                startPath(watch)
            }
        }
        for watch in watches.values {
            if owner.isEmpty {
                // The daemon left: nothing is known until it is back.
                forget(watch)
                watch.feed.publish(.unknown, isAnswer: true)
            } else if watch.isStarting && watch.startedWhileAway {
                // Sent while the name had no owner: the bus started the service for it, which
                // answers it (a second start would be a second call for the same hold).
                continue
            } else {
                forget(watch)
                start(watch) { error in if let error { watch.feed.fail(error) } }
            }
        }
        if owner.isEmpty { scheduleRestart() }
    }

    /// The next attempt, after its wait (`capped`: the longest, as for a bus that cannot start
    /// the service yet).
    func scheduleRestart(capped: Bool = false) {
        guard restartTimer == nil, owner.isEmpty, !isDisconnected, isHolding else { return }
        let fast = !capped && restartAttempts < Self.restartAttemptsMax && outageAttempts < 16
        let wait = fast ? Self.backoff(after: outageAttempts) : Self.restartCap
        restartTimer = Sources.after(milliseconds: wait) { [weak self] in self?.startServiceAgain() }
    }

    /// The wait before an attempt that follows `attempts` others of the same absence: the first
    /// wait, doubled with each attempt, at most `restartCap`.
    static func backoff(after attempts: Int) -> UInt32 {
        min(restartFirstWait << UInt32(min(attempts, 16)), restartCap)
    }

    /// Whether this client holds anything (a target or the path): only then is the service
    /// asked to come back.
    var isHolding: Bool { !(watches.isEmpty && pathWatch == nil) }

    /// Nothing is held any more: no attempt waits (no wake-up while nothing is held).
    func stopRestartsIfIdle() {
        if !isHolding {
            restartTimer = nil
            reconnectTimer = nil
        }
    }

    /// The service left while something is held: asks the bus to start it again, when the bus
    /// can (it is activatable): the fast attempts with backoff, then one every `restartCap`.
    /// Its return (`NameOwnerChanged`) re-establishes every hold (`ownerChanged`). When the
    /// bus cannot start it, whether it can is asked again after `restartCap`.
    private func startServiceAgain() {
        restartTimer = nil
        guard owner.isEmpty, !isDisconnected, isHolding else { return }
        let name = ServiceNames.busName
        isActivatable { [weak self] activatable in
            guard let self, self.owner.isEmpty, !self.isDisconnected else { return }
            guard activatable else {
                if !self.saidNotActivatable {
                    self.saidNotActivatable = true
                    self.logger.info("""
                        the system bus cannot start \(name); waiting for it to come back \
                        (asking again every \(Self.restartCap / 1000) s)
                        """)
                }
                return self.scheduleRestart(capped: true)
            }
            self.saidNotActivatable = false
            self.restartAttempts += 1
            self.outageAttempts += 1
            let attempt = self.restartAttempts
            let fast = attempt <= Self.restartAttemptsMax
            if fast {
                self.logger.info("starting \(name) again (attempt \(attempt) of \(Self.restartAttemptsMax))")
            } else {
                self.logger.debug("starting \(name) again (attempt \(attempt), one every \(Self.restartCap / 1000) s)")
            }
            // The bus's own activation timeout (25 s by default) ends a start that hangs.
            self.driver("StartServiceByName", [.string(name), .uint32(0)], timeoutMilliseconds: 60_000) {
                [weak self] result in
                guard let self, self.owner.isEmpty else { return }  // back: every hold is re-established
                if case .failure(let error) = result {
                    let message = "could not start \(name) (attempt \(attempt)): \(error.message)"
                    if fast { self.logger.warning("\(message)") } else { self.logger.debug("\(message)") }
                }
                if attempt == Self.restartAttemptsMax {
                    self.logger.warning("""
                        \(name) could not be started again (\(attempt) attempts); waiting for it to come back \
                        (and trying again every \(Self.restartCap / 1000) s while something is held)
                        """)
                }
                self.scheduleRestart()
            }
        }
    }
}
