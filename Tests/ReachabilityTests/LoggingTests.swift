import InMemoryLogging
import Logging
import Testing
@testable import Reachability
@testable import ReachabilityRuntime

/// The library's records reach the application's swift-log, and nothing else: no
/// bus here, so a manager answers in-process and the library says why.
@Suite("The library logs through the application's swift-log", .serialized)
struct LoggingTests {
    /// The record that explains the mode a new manager settled on.
    private func explained(_ mode: ReachabilityMode, in entries: [InMemoryLogHandler.Entry]) -> Bool {
        switch mode {
        case .inProcess:
            entries.contains { $0.level == .info && "\($0.message)".contains("answering in-process") }
        case .daemon:
            entries.contains { $0.level == .debug && "\($0.message)".contains("answering through") }
        }
    }

    @Test("unbootstrapped: silent; a logger the application passes, then one it bootstrapped, hear why")
    func applicationLogger() throws {
        // swift-log's own default (a stream handler) means nobody asked: the library keeps quiet.
        #expect(ReachabilityLogging.effectiveLogger == nil)

        // A logger the application hands over.
        let given = InMemoryLogHandler()
        var logger = Logger(label: "app") { _ in given }
        logger.logLevel = .trace
        ReachabilityLogging.logger = logger
        defer { ReachabilityLogging.logger = nil }
        let first = try NetworkReachabilityManager(target: .internet)
        #expect(explained(first.mode, in: given.entries), "\(given.entries)")
        #expect(given.entries.allSatisfy { $0.level <= .info || $0.level == .error },
                "a library logs at info or below: \(given.entries)")

        // The application bootstraps swift-log and passes nothing: the labelled default is its handler's.
        ReachabilityLogging.logger = nil
        let bootstrapped = InMemoryLogHandler()
        LoggingSystem.bootstrap { _ in
            var handler = bootstrapped
            handler.logLevel = .trace
            return handler
        }
        #expect(ReachabilityLogging.effectiveLogger != nil)
        let second = try NetworkReachabilityManager(target: .host("localhost"))
        #expect(explained(second.mode, in: bootstrapped.entries), "\(bootstrapped.entries)")
    }

    @Test("journal-style fields become dotted metadata keys; priorities map to swift-log levels")
    func mapping() {
        #expect(ReachabilityLogging.metadataKey("REACH_TARGET") == "target")
        #expect(ReachabilityLogging.metadataKey("REACH_BACKEND_MODE") == "backend.mode")
        #expect(ReachabilityLogging.level(.notice) == .notice)
        #expect(ReachabilityLogging.level(.err) == .error)
        #expect(ReachabilityLogging.level(.debug) == .debug)
    }
}
