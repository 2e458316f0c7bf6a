import InMemoryLogging
import Logging
import ReachabilityLoop
import Synchronization
import Testing
@testable import ReachabilitydClientCore
@testable import ReachabilityRuntime

/// The library's records reach the application's swift-log, and nothing else: a manager
/// asked to answer through the daemon says what it watches, or (no daemon here) why not.
@Suite("The library logs through the application's swift-log", .serialized)
struct LoggingTests {
    /// The record of a watch of `name` through the daemon: made, or (no daemon here) refused.
    /// Said for every watch, whatever other tests ran before (where answers come from is chosen,
    /// and said, once per process); and no engine runs in this process for it (the in-process
    /// one, the first time it is made, says NetworkManager cannot be reached, at some moment).
    private func watching(_ name: String, in entries: [InMemoryLogHandler.Entry]) -> Bool {
        entries.contains { entry in
            let message = "\(entry.message)"
            return entry.level == .debug
                && (message.contains("watching \(name) ") || message.contains("cannot watch \(name):"))
        }
    }

    @Test("unbootstrapped: silent; a logger the application passes, then one it bootstrapped, hear what it watches")
    func applicationLogger() throws {
        // swift-log's own default (a stream handler) means nobody asked: the library keeps quiet.
        #expect(ReachabilityLogging.effectiveLogger == nil)

        // A logger the application hands over.
        let given = SourcedRecorder()
        var logger = Logger(label: "app") { _ in given }
        logger.logLevel = .trace
        ReachabilityLogging.logger = logger
        defer { ReachabilityLogging.logger = nil }
        let first = try NetworkReachabilityManager(target: .address("127.0.0.61"), mode: .daemon)
        first.startListening(onQueue: .global()) { _ in }
        first.stopListening()
        #expect(watching("127.0.0.61", in: given.entries), "\(given.entries)")
        let library = given.events  // the records of every manager in this process: all the library's
        #expect(!library.isEmpty)
        #expect(library.allSatisfy { $0.level <= .info || $0.level == .error },
                "a library logs at info or below: \(library.map { ($0.source, $0.level, "\($0.message)") })")
        #expect(library.allSatisfy { $0.source.hasPrefix("Reachability") && $0.file.hasPrefix($0.source + "/") },
                "each record names the library's module and file: \(library.map { ($0.source, $0.file) })")

        // The application bootstraps swift-log and passes nothing: the labelled default is its handler's.
        ReachabilityLogging.logger = nil
        let bootstrapped = InMemoryLogHandler()
        LoggingSystem.bootstrap { _ in
            var handler = bootstrapped
            handler.logLevel = .trace
            return handler
        }
        #expect(ReachabilityLogging.effectiveLogger != nil)
        let second = try NetworkReachabilityManager(target: .address("127.0.0.62"), mode: .daemon)
        second.startListening(onQueue: .global()) { _ in }
        second.stopListening()
        #expect(watching("127.0.0.62", in: bootstrapped.entries),
                "\(bootstrapped.entries)")
    }

    @Test("the library's logger follows the application's of the moment: below its level nothing is made; above, the record keeps where it was written")
    func levelFirst() {
        // Made before the application chose its logger, as the runtime's is.
        let library = ReachabilityLogging.libraryLogger(debug: nil)
        let recorder = SourcedRecorder()
        var logger = Logger(label: "app") { _ in recorder }
        logger.logLevel = .info
        ReachabilityLogging.logger = logger
        defer { ReachabilityLogging.logger = nil }
        #expect(library.logLevel == .info)
        let made = Mutex(0)
        func message(_ text: String) -> String {
            made.withLock { $0 += 1 }
            return text
        }
        library.debug("\(message("dropped by the level"))")
        #expect(made.withLock { $0 } == 0, "a debug record was made for a logger at info")
        library.notice("\(message("kept"))", metadata: .event(.clientOverLimit, ["target": "example.com"]))
        let line: UInt = #line - 1
        #expect(made.withLock { $0 } == 1)
        // Other suites' managers share this process, and their records reach the same logger.
        let kept = recorder.events.filter { "\($0.message)" == "kept" }
        #expect(kept.count == 1)
        #expect(kept.first?.source == "ReachabilitydClientTests")
        #expect(kept.first?.file == "ReachabilitydClientTests/LoggingTests.swift")
        #expect(kept.first?.line == line)
        #expect(kept.first?.metadata?["target"] == "example.com")
        #expect(kept.first?.metadata?[Log.Event.metadataKey] == "\(Log.Event.clientOverLimit.id)")
    }

    @Test("REACHABILITY_DEBUG (set, not 0): every record on standard error at debug, whatever the application chose")
    func debugEnvironment() {
        for quiet: String? in [nil, "", "0"] {
            #expect(ReachabilityLogging.libraryLogger(debug: quiet).handler is ApplicationLogHandler)
        }
        let debug = ReachabilityLogging.libraryLogger(debug: "1")
        #expect((debug.handler as? SystemLogHandler)?.log.program == "reachability")
        #expect(debug.logLevel == .debug)
    }
}

/// Keeps every event with its source, file and line (InMemoryLogHandler keeps no source).
private final class SourcedRecorder: LogHandler, Sendable {
    private let kept = Mutex<[LogEvent]>([])
    var events: [LogEvent] { kept.withLock { $0 } }
    var entries: [InMemoryLogHandler.Entry] {
        events.map { InMemoryLogHandler.Entry(level: $0.level, message: $0.message, metadata: $0.metadata ?? [:]) }
    }

    func log(event: LogEvent) { kept.withLock { $0.append(event) } }

    var metadataProvider: Logger.MetadataProvider? { get { nil } set {} }
    var metadata: Logger.Metadata { get { [:] } set {} }
    private let level = Mutex(Logger.Level.trace)
    var logLevel: Logger.Level {
        get { level.withLock { $0 } }
        set { level.withLock { $0 = newValue } }
    }
    subscript(metadataKey _: String) -> Logger.Metadata.Value? { get { nil } set {} }
}
