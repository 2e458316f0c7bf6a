import ArgumentParser
import Foundation
import Reachability

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
            --no-daemon), reachctl runs the same engine itself and says so on standard error.

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
        subcommands: [Status.self, Query.self, Watch.self, List.self],
        defaultSubcommand: Status.self)

    /// Runs the command; every failure that is not help or the version exits with 2.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var command = command as? AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch let error as ReachabilityError {
            Output.error(error.message)
            Foundation.exit(ExitStatus.failure)
        } catch {
            if exitCode(for: error) == .success || error is ExitCode { exit(withError: error) }
            let message = fullMessage(for: error)
            Output.error(message.hasPrefix("Error: ") ? String(message.dropFirst(7)) : message)
            Foundation.exit(ExitStatus.failure)
        }
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

    var mode: ReachabilityMode? { noDaemon ? .inProcess : nil }

    /// A manager for `text` (the internet when `nil`), and a note on stderr when in-process.
    func manager(for text: String?) throws(ReachabilityError) -> NetworkReachabilityManager {
        let target = text.map(ReachabilityTarget.init) ?? .internet
        let manager = try NetworkReachabilityManager(target: target, mode: mode)
        if manager.mode == .inProcess { Output.noteInProcess(forced: noDaemon) }
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

    func run() async throws {
        try await Self.answer(targets.isEmpty ? [nil] : targets, options: options)
    }

    static func answer(_ targets: [String?], options: CommonOptions) async throws {
        var allReachable = true
        for text in targets {
            let manager = try options.manager(for: text)
            let state = try await manager.query()
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

    func run() async throws {
        let texts: [String?] = targets.isEmpty ? [nil] : targets
        let managers = try texts.map { text throws(ReachabilityError) in try options.manager(for: text) }
        let json = options.json
        try await withThrowingTaskGroup(of: Void.self) { group in
            for manager in managers {
                group.addTask {
                    var last: (ReachabilityFlags?, ReachabilityStatus)?
                    for try await state in manager.updates {
                        if let last, last.0 == state.flags, last.1 == state.status { continue }
                        last = (state.flags, state.status)
                        Output.state(state, of: manager, json: json, time: Date())
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
        abstract: "Show every target reachabilityd watches (for any client), with its state.")

    @OptionGroup var options: CommonOptions

    func run() async throws {
        if options.noDaemon {
            throw ValidationError("list shows the daemon's targets; it cannot run with --no-daemon")
        }
        for snapshot in try await NetworkReachabilityManager.daemonTargets() {
            Output.state(snapshot.state, of: snapshot.target, mode: .daemon, json: options.json, time: nil)
        }
    }
}
