import Testing
@testable import ReachabilityBus
@testable import ReachabilityPlatform
@testable import ReachabilityService

@Suite("reachabilityd's command line")
struct OptionsTests {
    @Test("defaults: the system bus, auto backend, the documented limits")
    func defaults() throws {
        let (command, options) = try Daemon.Options.parse([])
        #expect(command == .run)
        #expect(options.bus == .system && options.backend == .auto && !options.replace)
        #expect(options.maximumTargetsPerClient == 256 && options.maximumTargets == 16384)
        #expect(options.refreshInterval == 300)
    }

    @Test("every option, both spellings")
    func all() throws {
        let (_, options) = try Daemon.Options.parse([
            "--bus", "unix:path=/tmp/x", "--replace", "--backend=kernel", "--max-targets-per-client", "3",
            "--max-targets=9", "--refresh-interval", "60", "--verbose",
        ])
        #expect(options.bus == .custom("unix:path=/tmp/x") && options.replace && options.verbose)
        #expect(options.backend == .kernel && options.maximumTargetsPerClient == 3 && options.maximumTargets == 9)
        #expect(options.refreshInterval == 60)
        #expect(try Daemon.Options.parse(["--help"]).0 == .help)
        #expect(try Daemon.Options.parse(["--version"]).0 == .version)
    }

    @Test("bad command lines say what is wrong", arguments: [
        (["--system", "--session"], "choose one"),
        (["--bus"], "needs a value"),
        (["--bus", ""], "needs a D-Bus address"),
        (["--backend", "magic"], "auto, networkmanager or kernel"),
        (["--max-targets", "0"], "from 1"),
        (["--max-targets", "x"], "whole number"),
        (["--refresh-interval", "-5"], "from 1"),
        (["--frobnicate"], "unknown argument"),
    ])
    func bad(arguments: [String], message: String) {
        #expect {
            _ = try Daemon.Options.parse(arguments)
        } throws: { error in
            (error as? Daemon.Options.UsageError)?.description.contains(message) == true
        }
    }
}
