import ArgumentParser
import ReachabilityBus
import ReachabilityPlatform
import ReachabilityService

extension BackendMode: ExpressibleByArgument {}

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

    @Option(name: .long, help: ArgumentHelp(
        "Where device facts come from: auto (NetworkManager while it runs, else the kernel), networkmanager, kernel.",
        valueName: "backend"))
    var backend: BackendMode = .auto

    @Flag(name: .long, help: "Log debugging details.")
    var verbose = false

    @Option(name: .long, help: ArgumentHelp("Targets one client may watch.", valueName: "count"))
    var maxTargetsPerClient = 256

    @Option(name: .long, help: ArgumentHelp("Targets all clients together may watch.", valueName: "count"))
    var maxTargets = 16384

    @Option(name: .long, help: ArgumentHelp("Seconds between re-resolutions of watched host names.",
                                            valueName: "seconds"))
    var refreshInterval: UInt32 = 300

    func validate() throws {
        if [system, session, bus != nil].filter({ $0 }).count > 1 {
            throw ValidationError("choose one of --system, --session and --bus")
        }
        if let bus, bus.isEmpty { throw ValidationError("--bus needs a D-Bus address") }
        guard (1...1_000_000).contains(maxTargetsPerClient), (1...1_000_000).contains(maxTargets) else {
            throw ValidationError("target limits must be between 1 and 1000000")
        }
        guard refreshInterval >= 1 else { throw ValidationError("--refresh-interval must be at least 1 second") }
    }

    func run() throws {
        var options = Daemon.Options()
        options.bus = session ? .session : bus.map { .custom($0) } ?? .system
        options.replace = replace
        options.verbose = verbose
        options.maximumTargetsPerClient = maxTargetsPerClient
        options.maximumTargets = maxTargets
        options.refreshInterval = refreshInterval
        options.backend = backend
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
