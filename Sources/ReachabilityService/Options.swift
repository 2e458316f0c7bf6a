import ReachabilityBus
import ReachabilityPlatform

extension Daemon.Options {
    /// A command line that cannot be used; the message says why.
    public struct UsageError: Error, CustomStringConvertible {
        public let description: String
    }

    /// What the command line asks for.
    public enum Command: Equatable {
        case run
        case help
        case version
    }

    public static let usage = """
        Usage: reachabilityd [--system | --session | --bus ADDRESS] [--replace] [--backend BACKEND]
                             [--max-targets-per-client N] [--max-targets-per-user N] [--max-targets N]
                             [--refresh-interval SECONDS]
                             [--verbose]

        Network reachability (Apple's SCNetworkReachability) as a D-Bus service:
        io.github.reachabilityd.Reachability1. NetworkManager is always read from the
        system bus (DBUS_SYSTEM_BUS_ADDRESS is honoured).

          --system                    serve on the system bus (the default)
          --session                   serve on the session bus
          --bus ADDRESS               serve on the bus at this D-Bus address
          --replace                   take the bus name over from a running instance
          --backend BACKEND           auto (NetworkManager while it runs, else the kernel),
                                      networkmanager, or kernel (default: auto)
          --max-targets-per-client N  targets one client may watch (default: 256)
          --max-targets-per-user N    targets the clients of one user may watch together
                                      (default: 2048; at most --max-targets)
          --max-targets N             targets all clients together may watch (default: 16384)
          --refresh-interval SECONDS  re-resolve watched host names this often (default: 300)
          --verbose                   log debugging details
          --help, --version

        """

    /// Parses the daemon's arguments (without the program name). The daemon parses
    /// by hand to stay small: a command-line parsing library would add 2 MB of
    /// resident libraries to a process that runs all the time.
    public static func parse(_ arguments: [String]) throws(UsageError) -> (Command, Daemon.Options) {
        var options = Daemon.Options()
        var buses = 0
        var rest = arguments[...]
        func value(_ flag: String) throws(UsageError) -> String {
            guard let next = rest.popFirst(), !next.hasPrefix("--") || next.contains(":") else {
                throw UsageError(description: "\(flag) needs a value")
            }
            return next
        }
        func number(_ flag: String, _ range: ClosedRange<Int>) throws(UsageError) -> Int {
            let text = try value(flag)
            guard let n = Int(text), range.contains(n) else {
                throw UsageError(description: "\(flag) takes a whole number from \(range.lowerBound) "
                                 + "to \(range.upperBound), not \"\(text)\"")
            }
            return n
        }
        while let argument = rest.popFirst() {
            // --flag=value is accepted too.
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                rest.insert(String(argument[argument.index(after: equals)...]), at: rest.startIndex)
                rest.insert(String(argument[..<equals]), at: rest.startIndex)
                continue
            }
            switch argument {
            case "--help", "-h": return (.help, options)
            case "--version": return (.version, options)
            case "--system":
                options.bus = .system
                buses += 1
            case "--session":
                options.bus = .session
                buses += 1
            case "--bus":
                let address = try value(argument)
                guard !address.isEmpty else { throw UsageError(description: "--bus needs a D-Bus address") }
                options.bus = .custom(address)
                buses += 1
            case "--replace": options.replace = true
            case "--verbose": options.verbose = true
            case "--backend":
                let text = try value(argument)
                guard let mode = BackendMode(rawValue: text) else {
                    throw UsageError(description: "--backend is auto, networkmanager or kernel, not \"\(text)\"")
                }
                options.backend = mode
            case "--max-targets-per-client": options.maximumTargetsPerClient = try number(argument, 1...1_000_000)
            case "--max-targets-per-user": options.maximumTargetsPerUser = try number(argument, 1...1_000_000)
            case "--max-targets": options.maximumTargets = try number(argument, 1...1_000_000)
            case "--refresh-interval": options.refreshInterval = UInt32(try number(argument, 1...86_400))
            default:
                throw UsageError(description: "unknown argument \"\(argument)\"")
            }
        }
        guard buses <= 1 else { throw UsageError(description: "choose one of --system, --session and --bus") }
        return (.run, options)
    }
}
