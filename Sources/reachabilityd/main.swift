import ArgumentParser
import ReachabilityBus
import ReachabilityService

struct Reachabilityd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reachabilityd",
        abstract: "Network reachability (Apple's SCNetworkReachability) as a D-Bus service.",
        discussion: """
            Serves io.github.reachabilityd.Reachability1 on the chosen bus. NetworkManager is \
            always read from the system bus (DBUS_SYSTEM_BUS_ADDRESS is honoured).
            """,
        version: Names.version)

    @Flag(name: .long, help: "Serve on the system bus (the default).")
    var system = false

    @Flag(name: .long, help: "Serve on the session bus.")
    var session = false

    @Option(name: .long, help: ArgumentHelp("Serve on the bus at this D-Bus address.", valueName: "address"))
    var bus: String?

    @Flag(name: .long, help: "Take the bus name over from a running instance.")
    var replace = false

    @Flag(name: .long, help: "Log debugging details.")
    var verbose = false

    func validate() throws {
        if [system, session, bus != nil].filter({ $0 }).count > 1 {
            throw ValidationError("choose one of --system, --session and --bus")
        }
        if let bus, bus.isEmpty { throw ValidationError("--bus needs a D-Bus address") }
    }

    func run() throws {
        var options = Daemon.Options()
        options.bus = session ? .session : bus.map { .custom($0) } ?? .system
        options.replace = replace
        options.verbose = verbose
        do {
            let daemon = try Daemon(options: options)
            let status = try daemon.run()
            if status != 0 { throw ExitCode(status) }
        } catch let exit as Daemon.Exit {
            Log.error(exit.description)
            throw ExitCode(1)
        }
    }
}

Reachabilityd.main()
