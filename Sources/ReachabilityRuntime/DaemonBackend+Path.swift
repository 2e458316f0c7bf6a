import Logging
import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop

/// The daemon's path object (`WatchPath`), while a path monitor in this process runs: held
/// like a target, its `PropertiesChanged` followed with a match rule of its own (the daemon
/// sends them to its holders, each with its own user's paths).
extension DaemonBackend {
    /// The daemon's path object, followed.
    @LoopActor
    final class PathWatch {
        let feed: Feed<PathKey>
        var path: ObjectPath?
        var signal: SignalSubscription?
        var invalidated: SignalSubscription?
        var properties: [String: DBusValue] = [:]
        /// Its properties are a real answer: read (`GetAll`) since it was last held (or there
        /// are none, its daemon having left).
        var isAnswer = false

        init(feed: Feed<PathKey>) { self.feed = feed }

        func publish() { feed.publish(PathState(properties: properties), isAnswer: isAnswer) }

        /// Forgets the object (its daemon left, or a new one came): nothing is followed any more.
        func forget() {
            signal?.cancel()
            signal = nil
            invalidated?.cancel()
            invalidated = nil
            path = nil
            properties = [:]
        }
    }

    func openPath(_ feed: Feed<PathKey>) {
        let watch = PathWatch(feed: feed)
        pathWatch = watch
        // Set up at once: a path that cannot be followed is unsatisfied, not an error.
        feed.opened(nil)
        startPath(watch)
    }

    func closePath(_ feed: Feed<PathKey>) {
        guard let watch = pathWatch, watch.feed === feed else { return }
        pathWatch = nil
        watch.signal?.cancel()
        watch.invalidated?.cancel()
        if let path = watch.path {
            release(path)
        }
        stopRestartsIfIdle()
    }

    /// Holds the path object (`WatchPath`), follows its properties and reads them all.
    /// A daemon without `WatchPath` (older than the library) gives no interfaces: the path
    /// is unsatisfied, as with no network, and the error is logged.
    func startPath(_ watch: PathWatch) {
        call(Self.root, ServiceNames.managerInterface, Contract.Manager.watchPath.name) {
            [weak self, logger] result in
            logger.debug("WatchPath: \(result)")
            guard let self else { return }
            switch result {
            case .success(let values):
                guard case .objectPath(let path)? = values.first else {
                    self.logger.error("unexpected reply to WatchPath: \(values.signature)")
                    return watch.feed.publish(.none, isAnswer: true)
                }
                guard self.pathWatch === watch else {
                    // Closed meanwhile: give it back.
                    return self.release(path)
                }
                self.attachPath(watch, at: path)
            case .failure(let error):
                self.logger.error("WatchPath: \(error)")
                watch.feed.publish(.none, isAnswer: true)
            }
        }
    }

    private func attachPath(_ watch: PathWatch, at path: ObjectPath) {
        watch.path = path
        watch.isAnswer = false
        watch.signal = connection.subscribe(sender: ServiceNames.busName, path: path, interface: Self.properties,
                                            member: "PropertiesChanged") { values in
            guard values.count >= 2, values[0].stringValue == ServiceNames.pathInterface,
                case .dictionary(_, _, let entries) = values[1]
            else { return }
            watch.properties.merge(Self.dictionary(entries)) { $1 }
            watch.publish()
        }
        watch.invalidated = connection.subscribe(sender: ServiceNames.busName, path: path,
                                                 interface: ServiceNames.pathInterface,
                                                 member: Contract.Path.invalidated.name) { values in
            guard let reason = values.first?.stringValue.flatMap(InvalidationReason.init(rawValue:)) else { return }
            watch.feed.invalidate(reason)
        }
        readProperties(at: path, of: ServiceNames.pathInterface) { [weak self] result in
            guard let self, self.pathWatch === watch else { return }
            guard case .success(let properties) = result else {
                self.logger.error("GetAll on \(path.rawValue): \(result)")
                return watch.feed.publish(.none, isAnswer: true)
            }
            watch.properties = properties
            watch.isAnswer = true
            watch.publish()
        }
    }
}
