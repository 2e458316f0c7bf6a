import Glibc
import ReachabilityBus
import ReachabilityLoop
import ReachabilityService

/// Set up, announce, loop: everything else lives in ReachabilityService.
func main() -> Int32 {
    let command: Daemon.Options.Command
    let options: Daemon.Options
    do {
        (command, options) = try Daemon.Options.parse(Array(CommandLine.arguments.dropFirst()))
    } catch {
        Log.error("\(error.description)\n\(Daemon.Options.usage)")
        return 2
    }
    switch command {
    case .help:
        print(Daemon.Options.usage, terminator: "")
        return 0
    case .version:
        print("reachabilityd \(Names.version)")
        return 0
    case .run:
        // The exporter, chosen once: every instrument below reports to it.
        var options = options
        options.metricsText = PrometheusExport.bootstrap()
        // From here this thread is the loop's: everything below runs on LoopActor.
        return LoopActor.assumeIsolated(MainLoop()) { loop in
            do throws(Daemon.Exit) {
                let daemon = try Daemon(options: options, loop: loop)
                return try daemon.run()
            } catch {
                Log.error(error.description)
                return 1
            }
        }
    }
}

exit(main())
