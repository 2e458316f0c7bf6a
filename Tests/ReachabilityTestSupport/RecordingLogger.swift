import InMemoryLogging
import Logging

/// A logger of the test's own and what it kept (every level): no two tests share a log.
public func recordingLogger() -> (logger: Logger, records: InMemoryLogHandler) {
    var handler = InMemoryLogHandler()
    handler.logLevel = .trace
    return (Logger(label: "test") { _ in handler }, handler)
}
