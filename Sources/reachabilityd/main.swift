import Glibc
import Logging
import ReachabilityBus
import ReachabilityLoop
import ReachabilityService

/// Set up, announce, loop: everything else lives in ReachabilityService.
func main() -> Int32 {
    // A write to a closed pipe or socket fails (EPIPE) instead of killing the daemon: started with
    // its standard descriptors closed, or logging to a pipe whose reader left, it died (status 141).
    signal(SIGPIPE, SIG_IGN)
    // A closed standard descriptor is opened on /dev/null: else the first socket opened takes its
    // number, and a log line written to "stderr" would go into that socket.
    for fd: Int32 in 0...2 where fcntl(fd, F_GETFD) == -1 {
        _ = open("/dev/null", O_RDWR)
    }
    // The log, chosen once: the journal, `<N>` lines or a terminal (`SystemLog`), handed down
    // as a `Logger` to everything the daemon makes. No `LoggingSystem.bootstrap`: nothing
    // here asks swift-log for a logger by label.
    let log = SystemLog(program: "reachabilityd")
    let logger = log.logger
    let command: Daemon.Options.Command
    let options: Daemon.Options
    do {
        (command, options) = try Daemon.Options.parse(Array(CommandLine.arguments.dropFirst()))
    } catch {
        logger.error("\(error.description)\n\(Daemon.Options.usage)")
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
        if options.verbose { log.level = .debug }
        Memory.mapLargeBlocks()
        MainLoop.keepIdleWorkers()
        raiseDescriptorLimit(logger)
        // The exporter, chosen once: every instrument below reports to it.
        var options = options
        options.metricsText = PrometheusExport.bootstrap()
        // From here this thread is the loop's: everything below runs on LoopActor.
        return LoopActor.assumeIsolated(MainLoop()) { loop in
            do throws(Daemon.Exit) {
                let daemon = try Daemon(options: options, loop: loop, logger: logger, log: log)
                return try daemon.run()
            } catch {
                logger.error("\(error.description)")
                return 1
            }
        }
    }
}

/// The open files the daemon asks to be allowed: what peers can make it hold
/// (`BusConnection.peerDescriptorBound`, 509) plus its own (about 20, and 2 for each of its
/// 8 host lookups), with room to spare. The soft limit is raised to it (as far as the hard
/// limit allows): a parent may have left it lower; the unit sets both (`LimitNOFILE=`).
/// Wraps `setrlimit(RLIMIT_NOFILE)`.
func raiseDescriptorLimit(_ logger: Logger) {
    let wanted: rlim_t = 4096
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < wanted else { return }
    limit.rlim_cur = min(wanted, limit.rlim_max)
    _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    _ = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    let floor = rlim_t(BusConnection.peerDescriptorBound + 256)
    if limit.rlim_cur < floor {
        logger.warning("the limit on open files is \(limit.rlim_cur); \(floor) or more are needed to serve every peer")
    }
}

exit(main())
