import ArgumentParser
import Dispatch
import Glibc
import ReachabilityCore
import ReachabilityRuntime
import ReachabilitydClientCore
import Synchronization

/// `reachctl wait`: returns once every TARGET (the internet without one) is reachable, as
/// `nm-online` and `systemd-networkd-wait-online` do, for scripts and for boot ordering
/// (`reachability-wait@.service`). Driven by the targets' updates (the daemon's signals, or
/// the in-process engine's events), never by polling: it sleeps until a change or its
/// timeout.
struct Wait: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Wait until every TARGET is reachable (without one: the internet), then exit.",
        discussion: """
            Returns at once when the targets are reachable already; otherwise sleeps until a change \
            makes them so, or until the timeout. -4 and -6 ask for that family (both: both), \
            --unmetered for a connection that is not metered, --full for NetworkManager's \
            connectivity check to say "full" (the kernel backend cannot tell: it never does). \
            A host name counts once it is looked up and one of its addresses is reachable.

            EXIT STATUS
              0  reached
              1  timed out: each target not reached is named on standard error, with its reason
              2  usage error, invalid target, or the service failed
            """)

    @OptionGroup var options: CommonOptions

    @Argument(help: "Host names or address literals (none: the internet).")
    var targets: [String] = []

    @Flag(help: "Return when any one TARGET is reached, not every one.")
    var any = false

    @Flag(name: [.customShort("4"), .customLong("ipv4")], help: "Reachable over IPv4.")
    var ipv4 = false

    @Flag(name: [.customShort("6"), .customLong("ipv6")], help: "Reachable over IPv6.")
    var ipv6 = false

    @Flag(help: "On a connection that is not metered.")
    var unmetered = false

    @Flag(help: "With full connectivity (NetworkManager's check), not only a route.")
    var full = false

    // .unconditional: `--timeout -1` is a value to refuse by its range, not a missing one.
    @Option(parsing: .unconditional,
            help: ArgumentHelp("Give up after this long (0: wait forever).", valueName: "seconds"))
    var timeout: Double = 30

    @Flag(name: [.customShort("q"), .customLong("quiet")], help: "Print nothing; the exit status says it.")
    var quiet = false

    func validate() throws {
        guard timeout.isFinite, timeout >= 0, timeout <= 86_400 * 365 else {
            throw ValidationError("--timeout takes seconds from 0 (forever) to a year, not \(timeout)")
        }
    }

    var condition: WaitCondition {
        WaitCondition(ipv4: ipv4, ipv6: ipv6, unmetered: unmetered, fullConnectivity: full)
    }

    func run() async throws {
        let texts: [String?] = targets.isEmpty ? [nil] : targets
        if quiet { Output.silenceNotes() }
        let managers = try texts.map { text throws(ReachabilityError) in
            try options.manager(for: text, command: "wait")
        }
        let board = Board(managers: managers, condition: condition, any: any, json: options.json, quiet: quiet)
        if timeout > 0 {
            // One timer, handing over to the main queue, where everything else runs: the only
            // wake-up that is not a change (on the runtime's loop: see `LoopTimer`).
            let seconds = timeout
            _ = LoopTimer.after(seconds: seconds, on: .main) { board.timedOut(after: seconds) }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in managers.indices {
                group.addTask {
                    for try await state in managers[index].updates { board.record(state, at: index) }
                }
            }
            // The first failure ends the command (the service failed: exit 2).
            while try await group.next() != nil {}
        }
    }

    /// The latest state of every target; ends the process once the wait is over.
    final class Board: Sendable {
        let managers: [NetworkReachabilityManager]
        let condition: WaitCondition
        let any: Bool
        let json: Bool
        let quiet: Bool
        private let states: Mutex<[ReachabilityState?]>

        init(managers: [NetworkReachabilityManager], condition: WaitCondition, any: Bool, json: Bool, quiet: Bool) {
            self.managers = managers
            self.condition = condition
            self.any = any
            self.json = json
            self.quiet = quiet
            states = Mutex(Array(repeating: nil, count: managers.count))
        }

        func record(_ state: ReachabilityState, at index: Int) {
            let all = states.withLock { states in
                states[index] = state
                return states
            }
            guard condition.isMet(by: all, any: any) else { return }
            finish(all, status: ExitStatus.reachable)
        }

        func timedOut(after seconds: Double) {
            let all = states.withLock { $0 }
            if !quiet {
                let shown = seconds == seconds.rounded() ? String(Int(seconds)) : String(seconds)
                for (manager, state) in zip(managers, all) {
                    let unmet = state.map(condition.unmet) ?? .unknown
                    guard let unmet else { continue }
                    Output.error("\(manager.target): not reached within \(shown) s: \(unmet)")
                }
            }
            finish(all, status: ExitStatus.notReachable)
        }

        /// With `--json` (and not `-q`), each target's last state; then the exit.
        private func finish(_ all: [ReachabilityState?], status: Int32) -> Never {
            if json && !quiet {
                for (manager, state) in zip(managers, all) {
                    Output.state(state ?? .unknown, of: manager, json: true, time: Output.now())
                }
            }
            Glibc.exit(status)
        }
    }
}
