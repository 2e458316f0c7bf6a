import Logging
import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop

/// reachabilityd's metrics, for the façades' tools (`NetworkReachabilityManager.daemonMetrics`).
package enum DaemonMetrics {
    /// reachabilityd's metrics in the Prometheus text format (`Metrics.Read`). Root and
    /// the `adm` group only; anybody else gets an error that says so. Blocks the
    /// library's thread for the length of the call: for tools. `startingTheService` false: a
    /// service that is not running is not started for this (an error says it is not there).
    package static func read(timeoutMilliseconds: Int32 = 15_000, startingTheService: Bool = true)
        async throws(ReachabilityError) -> String
    {
        let result: Result<String, ReachabilityError> = await Runtime.answer { runtime, done in
            do throws(ReachabilityError) {
                let connection = try MetricsFollower.connect(logger: runtime.logger)
                done(MetricsFollower.text(Result { () throws(BusError) in
                    try connection.call(destination: ServiceNames.busName, path: MetricsFollower.root,
                                        interface: ServiceNames.metricsInterface, member: Contract.Metrics.read.name,
                                        timeoutMilliseconds: timeoutMilliseconds, autoStart: startingTheService)
                }))
            } catch {
                done(.failure(error))
            }
        }
        return try result.get()
    }

    /// The daemon's metrics now, and again after each change it announces
    /// (`Metrics.Follow`, `Metrics.Changed`): never on a timer. When the daemon leaves
    /// the bus an empty text comes, then nothing until it is back (then it is followed
    /// again; the bus does not start it for this). Ends with the
    /// error when the daemon refuses (not root or `adm`), or when the consumer stops.
    package static func updates() -> AsyncThrowingStream<String, any Error> {
        let id = Runtime.newID()
        return AsyncThrowingStream { continuation in
            continuation.onTermination = { _ in Runtime.send { _ in MetricsFollower.all[id] = nil } }
            Runtime.send { runtime in
                do throws(ReachabilityError) {
                    MetricsFollower.all[id] = try MetricsFollower(logger: runtime.logger) { result in
                        switch result {
                        case .success(let text): continuation.yield(text)
                        case .failure(let error):
                            continuation.finish(throwing: error)
                            // Dropped in a job of its own: this runs inside its connection's
                            // dispatch, and a connection must not end while it dispatches.
                            Runtime.send { _ in MetricsFollower.all[id] = nil }
                        }
                    }
                } catch {
                    continuation.finish(throwing: error)
                }
            }
        }
    }
}

/// Follows the daemon's metrics on a connection of its own.
@LoopActor
final class MetricsFollower {
    static let root = ObjectPath(rawValue: ServiceNames.rootPath)!
    /// The followers of `daemonMetricsUpdates`, by subscription.
    static var all: [Int: MetricsFollower] = [:]

    private let connection: BusConnection
    private var owner: SignalSubscription?
    private var changed: SignalSubscription?
    private let deliver: (Result<String, ReachabilityError>) -> Void

    init(logger: Logger, _ deliver: @escaping (Result<String, ReachabilityError>) -> Void) throws(ReachabilityError) {
        self.deliver = deliver
        connection = try Self.connect(logger: logger)
        // The owner first: the bus answers in order, so the daemon's unique name is known
        // before its first Changed (signals from anybody else are not taken for its own).
        // The daemon gone: an empty text (it has no metrics then), so that a writer of them
        // says so instead of keeping the last ones as if they were fresh.
        owner = connection.followOwner(of: ServiceNames.busName) { [weak self] owner in
            if owner.isEmpty { self?.deliver(.success("")) } else { self?.follow() }
        }
        changed = connection.subscribe(sender: ServiceNames.busName, path: Self.root,
                                       interface: ServiceNames.metricsInterface,
                                       member: Contract.Metrics.changed.name) { [weak self] _ in self?.read() }
        follow()
    }

    /// A private connection to the system bus, logging to `logger` (the library's).
    static func connect(logger: Logger) throws(ReachabilityError) -> BusConnection {
        do {
            return try BusConnection(.system, logger: logger)
        } catch {
            throw .serviceUnavailable(error.message)
        }
    }

    /// `Follow`, then the text as it is now.
    private func follow() {
        connection.callAsync(destination: ServiceNames.busName, path: Self.root,
                             interface: ServiceNames.metricsInterface, member: Contract.Metrics.follow.name) {
            [weak self] reply in
            guard let self else { return }
            if case .failure(let error) = reply { return self.deliver(.failure(Self.error(error))) }
            self.read()
        }
    }

    private func read() {
        connection.callAsync(destination: ServiceNames.busName, path: Self.root,
                             interface: ServiceNames.metricsInterface, member: Contract.Metrics.read.name) {
            [weak self] reply in
            self?.deliver(Self.text(reply))
        }
    }

    static func text(_ reply: Result<[DBusValue], BusError>) -> Result<String, ReachabilityError> {
        switch reply {
        case .success(let values):
            guard let text = values.first?.stringValue else {
                return .failure(.failed("Metrics.Read answered '\(values.signature)', not a string"))
            }
            return .success(text)
        case .failure(let error): return .failure(Self.error(error))
        }
    }

    /// The daemon's refusal says everything itself ("the metrics are for root and the adm
    /// group; ...") and is passed on as it is; the bus's own (its policy refused the call
    /// before the daemon saw it) gets the same first words, once.
    static func error(_ error: BusError) -> ReachabilityError {
        guard error.name == "org.freedesktop.DBus.Error.AccessDenied" else { return ReachabilityError(error) }
        return error.message.hasPrefix(refusal) ? .failed(error.message) : .failed("\(refusal) (\(error.message))")
    }

    static let refusal = "the metrics are for root and the adm group"
}
