import ArgumentParser
import Dispatch
import Glibc
import ReachabilityCore
import ReachabilityRuntime
import ReachabilitydClientCore
import Synchronization

/// `reachctl follow-units`: what `reachabilityd-units.service` runs. It follows the
/// internet target and has systemd start `reachability-online.target` while the internet
/// is reachable and `reachability-unmetered.target` while it is reachable and not metered
/// (`StartUnit`/`StopUnit` on `org.freedesktop.systemd1`), each stopped only once its
/// condition has failed for `--stop-delay` without a break (`UnitDebounce`).
struct FollowUnits: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "follow-units",
        abstract: "Start and stop reachability-online.target and reachability-unmetered.target as the internet comes and goes.",
        discussion: """
            What reachabilityd-units.service runs (as root: systemd lets only root, or whom \
            polkit allows, start units). A target is started as soon as its condition holds \
            (the internet reachable; reachable and not metered), and stopped once it has failed \
            for --stop-delay seconds without a break, so that a link that blinks does not stop \
            what is bound to it. Runs until stopped.
            """)

    @OptionGroup var options: CommonOptions

    @Option(name: .customLong("stop-delay"), parsing: .unconditional, help: ArgumentHelp("Seconds a condition must fail before its target is stopped.",
                                                                valueName: "seconds"))
    var stopDelay: Double = 2

    func validate() throws {
        guard stopDelay.isFinite, stopDelay >= 0, stopDelay <= 3600 else {
            throw ValidationError("--stop-delay takes 0 to 3600 seconds, not \(stopDelay)")
        }
    }

    /// Each target, its condition, and the file whose presence its `ConditionPathExists=` asks
    /// for (in `conditionDirectory`).
    static let units: [(name: String, condition: WaitCondition, file: String)] = [
        ("reachability-online.target", .online, "online"),
        ("reachability-unmetered.target", .onlineUnmetered, "unmetered"),
    ]

    /// Where the condition files are: the unit's `RuntimeDirectory=` (systemd names it in
    /// `RUNTIME_DIRECTORY`, and removes it when the helper stops), else
    /// /run/reachabilityd-units. A target's file exists exactly while this helper runs and
    /// its condition holds, so a target pulled in by anything else (`Wants=`, `Requires=`, a
    /// manual `systemctl start`) while the condition is false, or while nobody knows it, is
    /// skipped by systemd instead of started.
    static let conditionDirectory: String = {
        let named = getenv("RUNTIME_DIRECTORY").map { String(cString: $0) }
        return named.flatMap { $0.split(separator: ":").first.map(String.init) } ?? "/run/reachabilityd-units"
    }()

    /// Creates or removes a target's condition file; tried (and a failure said) once per change.
    static func setCondition(_ file: String, _ holds: Bool) {
        let path = conditionDirectory + "/" + file
        if holds {
            let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
            if fd < 0 { return Output.error("cannot create \(path): \(String(cString: strerror(errno)))") }
            close(fd)
        } else if unlink(path) != 0 && errno != ENOENT {
            Output.error("cannot remove \(path): \(String(cString: strerror(errno)))")
        }
    }

    func run() async throws {
        let manager = try options.manager(for: nil, command: "follow-units")
        let follower = Follower(stopDelay: Int64(stopDelay * 1_000_000))
        for try await state in manager.updates { follower.changed(to: state) }
    }

    /// The units' debounce, on the main queue (where the command's tasks and its timers run).
    final class Follower: Sendable {
        private struct State {
            var debounces: [UnitDebounce]
            var latest: ReachabilityState?
            var timerArmed = false
            /// What each target's condition file was last set to (`nil`: not yet).
            var conditions: [Bool?] = FollowUnits.units.map { _ in nil }
        }

        private let state: Mutex<State>

        init(stopDelay: Int64) {
            state = Mutex(State(debounces: FollowUnits.units.map { _ in UnitDebounce(stopDelay: stopDelay) }))
        }

        func changed(to new: ReachabilityState) {
            // Nothing is decided before the first answer (Unknown then is no news about the network).
            let first = state.withLock { state in
                defer { if state.latest != nil || new.flags != nil { state.latest = new } }
                return state.latest == nil
            }
            if first && new.flags == nil { return }
            if first {
                // What ran before this helper started (or before it was restarted) may be stale:
                // a target whose condition fails now is stopped at once.
                for unit in FollowUnits.units where !unit.condition.isMet(by: new) {
                    Output.line("\(unit.name): \(unit.condition.unmet(by: new).map { "\($0)" } ?? ""); stopping it")
                    Self.ask("StopUnit", unit.name)
                }
            }
            evaluate()
        }

        /// Starts or stops what the latest state and the time ask for; arms a timer for a stop
        /// that waits its delay.
        private func evaluate() {
            var clock = timespec()
            clock_gettime(CLOCK_MONOTONIC, &clock)
            let now = Int64(clock.tv_sec) * 1_000_000 + Int64(clock.tv_nsec) / 1000
            let (actions, latest, deadline, conditions) = state.withLock { state in
                let latest = state.latest ?? .unknown
                var actions: [UnitDebounce.Action] = []
                let met = FollowUnits.units.map { $0.condition.isMet(by: latest) }
                for index in state.debounces.indices {
                    actions.append(state.debounces[index].update(met: met[index], now: now))
                }
                var deadline = state.debounces.compactMap(\.deadline).min()
                if state.timerArmed { deadline = nil } else if deadline != nil { state.timerArmed = true }
                // Only the conditions that changed since they were last written.
                let conditions = met.indices.map { state.conditions[$0] == met[$0] ? nil : met[$0] }
                state.conditions = met
                return (actions, latest, deadline, conditions)
            }
            // The condition files follow the condition at once, without the debounce: nothing
            // else starts a target while its condition fails, even before this stops it.
            for (unit, holds) in zip(FollowUnits.units, conditions) {
                if let holds { FollowUnits.setCondition(unit.file, holds) }
            }
            for (unit, action) in zip(FollowUnits.units, actions) {
                switch action {
                case .start:
                    Output.line("\(unit.name): \(latest.summary); starting it")
                    Self.ask("StartUnit", unit.name)
                case .stop:
                    Output.line("\(unit.name): \(unit.condition.unmet(by: latest).map { "\($0)" } ?? "") "
                                + "for the whole delay; stopping it")
                    Self.ask("StopUnit", unit.name)
                case .none:
                    break
                }
            }
            if let deadline {
                let wait = max(0, deadline - now)
                _ = LoopTimer.after(seconds: Double(wait) / 1_000_000, on: .main) { [self] in
                    state.withLock { $0.timerArmed = false }
                    evaluate()
                }
            }
        }

        /// `StartUnit`/`StopUnit(unit, "replace")` on systemd, without waiting for the job; a
        /// refusal is said on standard error (the journal), and the next change asks again.
        private static func ask(_ method: String, _ unit: String) {
            // On the main queue, as every task of reachctl's (see `MainQueueExecutor`).
            MainQueueExecutor.start {
                if let error = await SystemdUnits.call(method, unit: unit) {
                    Output.error("\(method) \(unit): \(error)")
                }
            }
        }
    }
}
