import ArgumentParser
import Dispatch
import Glibc
import ReachabilitydClientCore

/// `reachctl`: network reachability from the command line, as macOS `scutil -r`
/// shows it, from reachabilityd — or from the same engine in-process when no
/// daemon is on the system bus.
@main
struct Reachctl: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reachctl",
        abstract: "Show whether the internet, a host or an address is reachable, and how.",
        discussion: """
            Answers come from reachabilityd on the system bus. When it is not there (or with \
            --no-daemon), reachctl runs the same engine itself and says so on standard error; \
            --daemon asks the daemon only. These options, and --json, go before or after the command.

            TARGET is a host name (international names are allowed) or an IPv4 or IPv6 address \
            literal (IPv6 with an optional %scope). Without a TARGET, the internet is meant.

            Flags are named as scutil -r names them: Reachable, Transient Connection, Connection \
            Required, Connection On Traffic, Intervention Required, Connection On Demand, Local \
            Address, Directly Reachable Address, WWAN; "Not Reachable" when none is set.

            EXIT STATUS
              0  every target is reachable
              1  a target is not reachable (or its reachability is unknown)
              2  usage error, invalid target, or the service failed
            """,
        version: NetworkReachabilityManager.version,
        subcommands: [Status.self, Query.self, Watch.self, Wait.self, List.self, Doctor.self, Metrics.self,
                      FollowUnits.self],
        defaultSubcommand: Status.self)

    /// Runs the command in a task whose jobs all run on the main queue (see
    /// `MainQueueExecutor`); the process ends when the command does.
    static func main() {
        MainQueueExecutor.start {
            await runCommand()
            Glibc.exit(ExitStatus.reachable)
        }
        dispatchMain()
    }

    /// Runs the command; every failure that is not help or the version exits with 2.
    static func runCommand() async {
        let arguments = arranged(Array(CommandLine.arguments.dropFirst()))
        if let word = unknownCommand(in: arguments) {
            var message = "unknown command \"\(word)\"; the commands are "
                + commandNames.filter { $0 != "help" }.joined(separator: ", ")
            if word.contains(".") || word.contains(":") { message += " (for a host: reachctl query \(word))" }
            Output.error(message)
            Glibc.exit(ExitStatus.failure)
        }
        do {
            var command = try parseAsRoot(arguments)
            if var command = command as? AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch let error as ReachabilityError {
            Output.error(error.message)
            Glibc.exit(ExitStatus.failure)
        } catch {
            if exitCode(for: error) == .success || error is ExitCode { exit(withError: error) }
            let message = fullMessage(for: error)
            Output.error(message.hasPrefix("Error: ") ? String(message.dropFirst(7)) : message)
            Glibc.exit(ExitStatus.failure)
        }
    }

    /// The options every command takes, which may also come before the command.
    static let globalFlags: Set<String> = ["--json", "--no-daemon", "--daemon"]
    static let commandNames = ["status", "query", "watch", "wait", "list", "doctor", "metrics", "follow-units", "help"]

    /// `arguments` with the global options that precede the command moved after it
    /// (`reachctl --json query x` is `reachctl query --json x`).
    static func arranged(_ arguments: [String]) -> [String] {
        let leading = arguments.prefix { globalFlags.contains($0) }
        guard !leading.isEmpty, leading.count < arguments.count,
            commandNames.contains(arguments[leading.count])
        else { return arguments }
        return [arguments[leading.count]] + leading + arguments[(leading.count + 1)...]
    }

    /// The first word, when it is not a command (the default command, status, takes none).
    static func unknownCommand(in arguments: [String]) -> String? {
        var skipValue = false
        for argument in arguments {
            if skipValue {
                skipValue = false
                continue
            }
            if argument == "--" { return nil }
            if argument.hasPrefix("-") {
                skipValue = argument == "--generate-completion-script"
                continue
            }
            return commandNames.contains(argument) ? nil : argument
        }
        return nil
    }
}

/// Exit statuses a script can test.
enum ExitStatus {
    static let reachable: Int32 = 0
    static let notReachable: Int32 = 1
    static let failure: Int32 = 2
}

/// Options every command takes.
struct CommonOptions: ParsableArguments {
    @Flag(help: "Print JSON: one object per target (per change for watch), one per line.")
    var json = false

    @Flag(name: .customLong("no-daemon"), help: "Do not ask reachabilityd; run the engine in this process.")
    var noDaemon = false

    @Flag(name: .customLong("daemon"), help: "Ask reachabilityd only; fail when it cannot be reached.")
    var daemonOnly = false

    func validate() throws {
        if noDaemon && daemonOnly { throw ValidationError("--daemon and --no-daemon exclude each other") }
    }

    var mode: ReachabilityMode? { noDaemon ? .inProcess : daemonOnly ? .daemon : nil }

    /// A manager for `text` (the internet when `nil`; with `from`, the address pair from that
    /// local address to `text`, or the local address alone), and a note on stderr when in-process.
    func manager(for text: String?, from local: String? = nil, command: String) throws(ReachabilityError)
        -> NetworkReachabilityManager
    {
        if let text { try TargetText.check(text, command: command) }
        let target = local.map { ReachabilityTarget.addressPair(local: $0, remote: text ?? "") }
            ?? text.map(ReachabilityTarget.init) ?? .internet
        let manager: NetworkReachabilityManager
        let chosen: ReachabilityMode
        do {
            manager = try NetworkReachabilityManager(target: target, mode: mode)
            chosen = try manager.chosenMode()
        } catch {
            throw TargetText.explained(error, hint: "without --daemon, reachctl evaluates in this process")
        }
        if chosen == .inProcess { Output.noteInProcess(forced: noDaemon) }
        return manager
    }
}

struct Status: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the internet's reachability (the default command).")

    @OptionGroup var options: CommonOptions

    func run() async throws {
        try await Query.answer([nil], options: options)
    }
}

struct Query: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the reachability of each TARGET once.",
        discussion: "A host name is looked up first. Exit status 0 only if every TARGET is reachable.")

    @OptionGroup var options: CommonOptions

    @Argument(help: "Host names or address literals (none: the internet).")
    var targets: [String] = []

    @Option(name: .customLong("from"), help: ArgumentHelp(Self.fromHelp, valueName: "local"))
    var local: String?

    static let fromHelp = "A local address: answer for packets from it (ip route get TARGET from LOCAL; each "
        + "TARGET an address literal); with no TARGET, whether LOCAL is configured on a link that can carry packets."

    func run() async throws {
        try await Self.answer(targets.isEmpty ? [nil] : targets, from: local, options: options)
    }

    static func answer(_ targets: [String?], from local: String? = nil, options: CommonOptions) async throws {
        var allReachable = true
        for text in targets {
            let manager = try options.manager(for: text, from: local, command: "query")
            let state: ReachabilityState
            do {
                state = try await manager.query()
            } catch {
                throw TargetText.explained(error)
            }
            allReachable = allReachable && state.isReachable
            Output.state(state, of: manager, json: options.json, time: nil)
        }
        if !allReachable { throw ExitCode(ExitStatus.notReachable) }
    }
}

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show each TARGET's reachability, then a line for every change, until interrupted.",
        discussion: """
            A change is a change of the flags or the status (what reachabilityd's StatusChanged \
            signal announces). Every line starts with the time.
            """)

    @OptionGroup var options: CommonOptions

    @Argument(help: "Host names or address literals (none: the internet).")
    var targets: [String] = []

    @Option(name: .customLong("from"), help: ArgumentHelp(Query.fromHelp, valueName: "local"))
    var local: String?

    func run() async throws {
        let texts: [String?] = targets.isEmpty ? [nil] : targets
        let managers = try texts.map { text throws(ReachabilityError) in
            try options.manager(for: text, from: local, command: "watch")
        }
        let json = options.json
        try await withThrowingTaskGroup(of: Void.self) { group in
            for manager in managers {
                group.addTask {
                    var last: (ReachabilityFlags?, ReachabilityStatus)?
                    for try await state in manager.updates {
                        if let last, last.0 == state.flags, last.1 == state.status { continue }
                        last = (state.flags, state.status)
                        Output.state(state, of: manager, json: json, time: Output.now())
                    }
                }
            }
            // The first failure ends the command (waitForAll would wait for the other watches).
            while try await group.next() != nil {}
        }
    }
}

struct List: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show the targets reachabilityd watches for your user (for every user, as root), with their state.")

    @OptionGroup var options: CommonOptions

    func run() async throws {
        if options.noDaemon {
            throw ValidationError("list shows the daemon's targets; it cannot run with --no-daemon")
        }
        let snapshots: [ReachabilitySnapshot]
        do {
            snapshots = try await NetworkReachabilityManager.daemonTargets()
        } catch {
            throw TargetText.explained(error, hint: "list shows the targets the daemon watches")
        }
        if snapshots.isEmpty && !options.json {
            // Each user sees the targets its own connections hold; root sees all of them.
            Output.line(getuid() == 0 ? "reachabilityd watches no target."
                        : "reachabilityd watches no target for this user (root sees every user's).")
        }
        // Root sees every user's targets, so it is told whose they are: in JSON, each target's
        // record names its holders; in words, a list follows the targets.
        var holders: [ReachabilityHolder] = []
        if getuid() == 0, !snapshots.isEmpty {
            do {
                holders = try await NetworkReachabilityManager.daemonHolders()
            } catch {
                throw TargetText.explained(error, hint: "list names the holders of the targets")
            }
        }
        let holdersOf = Dictionary(grouping: holders, by: \.targetName)
        for snapshot in snapshots {
            if options.json {
                let mine = getuid() == 0 ? holdersOf[snapshot.target.description] ?? [] : nil
                Output.line(Output.Record(snapshot.state, target: snapshot.target, mode: .daemon, time: nil,
                                          holders: mine).json)
            } else {
                Output.state(snapshot.state, of: snapshot.target, mode: .daemon, json: false, time: nil)
            }
        }
        guard !holders.isEmpty, !options.json else { return }
        Output.line("Holders:")
        for holder in holders {
            Output.line("  \(holder.targetName)  \(Doctor.userName(holder.user)), \(holder.client)")
        }
    }
}
