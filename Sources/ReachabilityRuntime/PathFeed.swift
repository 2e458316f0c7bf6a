import ReachabilityCore
import ReachabilityLoop

/// The per-interface paths (`PathState`) of one backend, shared by every path
/// monitor in this process. Lives on the loop thread. Subscribers get the
/// current state once it is a real answer, then every change.
@LoopActor
final class PathFeed {
    private(set) var state = PathState.none
    private(set) var isSettled = false
    private var subscribers: [Int: @Sendable (PathState) -> Void] = [:]

    func add(_ id: Int, _ receive: @escaping @Sendable (PathState) -> Void) {
        subscribers[id] = receive
        if isSettled { receive(state) }
    }

    func remove(_ id: Int) {
        subscribers[id] = nil
        invalidationSubscribers[id] = nil
    }

    /// Told of every invalidation, with its reason.
    private var invalidationSubscribers: [Int: @Sendable (InvalidationReason) -> Void] = [:]

    var isEmpty: Bool { subscribers.isEmpty && invalidationSubscribers.isEmpty }

    func addInvalidations(_ id: Int, _ receive: @escaping @Sendable (InvalidationReason) -> Void) {
        invalidationSubscribers[id] = receive
    }

    /// A connection made before may be broken (`Path.Invalidated`): its subscribers hear the reason.
    /// (Another network is a new path for the path subscribers already: `publish`.)
    func invalidate(_ reason: InvalidationReason) {
        for receive in Array(invalidationSubscribers.values) { receive(reason) }
    }

    /// The last network that had an identity.
    private var lastNetwork = ""

    /// A new state from the backend; `settled` once it is a real answer. A state on another
    /// network than the last one (`networkIdentity`; not a flap back to the same) is a new path
    /// even when nothing else differs (`PathState.invalidations`), as Apple's monitor delivers
    /// a new path on a gateway change.
    func publish(_ new: PathState, settled: Bool) {
        var new = new
        new.invalidations = state.invalidations
        if !new.networkIdentity.isEmpty {
            if !lastNetwork.isEmpty && new.networkIdentity != lastNetwork { new.invalidations &+= 1 }
            lastNetwork = new.networkIdentity
        }
        let changed = new != state || (settled && !isSettled)
        state = new
        isSettled = isSettled || settled
        guard isSettled, changed else { return }
        for receive in Array(subscribers.values) { receive(state) }
    }
}

extension Runtime {
    /// Adds a subscriber to the path feed of the mode the library would use
    /// (the daemon when it is on the bus, else in-process); opened on first use.
    func subscribePath(_ id: Int, _ receive: @escaping @Sendable (PathState) -> Void) {
        choosingPath.insert(id)
        mode(nil) { [unowned self] result in
            // A subscriber that left while the mode was being chosen is dropped here.
            guard self.choosingPath.remove(id) != nil else { return }
            self.subscribePath(id, mode: result, receive)
        }
    }

    private func subscribePath(_ id: Int, mode result: Result<ReachabilityMode, ReachabilityError>,
                               _ receive: @escaping @Sendable (PathState) -> Void) {
        guard case .success(let mode) = result, case .success(let backend) = backend(mode) else {
            // Nothing can watch the network here: the path is, and stays, unsatisfied.
            return receive(.none)
        }
        pathFeedOfSubscriber[id] = mode
        if let feed = pathFeeds[mode] { return feed.add(id, receive) }
        let feed = PathFeed()
        pathFeeds[mode] = feed
        feed.add(id, receive)
        backend.openPath(feed)
    }

    /// Adds a subscriber to the invalidations of the path feed the library would use.
    func subscribeInvalidations(_ id: Int, _ receive: @escaping @Sendable (InvalidationReason) -> Void) {
        choosingPath.insert(id)
        mode(nil) { [unowned self] result in
            guard self.choosingPath.remove(id) != nil else { return }
            guard case .success(let mode) = result, case .success(let backend) = self.backend(mode) else { return }
            self.pathFeedOfSubscriber[id] = mode
            if let feed = self.pathFeeds[mode] { return feed.addInvalidations(id, receive) }
            let feed = PathFeed()
            self.pathFeeds[mode] = feed
            feed.addInvalidations(id, receive)
            backend.openPath(feed)
        }
    }

    func unsubscribePath(_ id: Int) {
        if choosingPath.remove(id) != nil { return }
        guard let mode = pathFeedOfSubscriber.removeValue(forKey: id), let feed = pathFeeds[mode] else { return }
        feed.remove(id)
        guard feed.isEmpty else { return }
        pathFeeds[mode] = nil
        try? backend(mode).get().closePath(feed)
    }
}

/// The per-interface paths for the `NetworkPath` product (same package, not
/// public API): the same runtime, backends and mode choice as the managers.
package enum PathUpdates {
    /// Calls `receive` on the library's thread with the current paths once they
    /// are known, then with every change, until `unsubscribe` with the returned id.
    /// `receive` must return quickly and must not block on the library.
    package static func subscribe(_ receive: @escaping @Sendable (PathState) -> Void) -> Int {
        let id = Runtime.newID()
        Runtime.send { runtime in runtime.subscribePath(id, receive) }
        return id
    }

    /// Stops the subscription; the daemon's path object is released once no
    /// monitor in this process follows it. Never inside the delivery that may call it.
    package static func unsubscribe(_ id: Int) {
        Runtime.send { runtime in runtime.unsubscribePath(id) }
    }

    /// Calls `receive` on the library's thread with the reason of every invalidation
    /// (`Path.Invalidated`: a connection made before may be broken), until `unsubscribe`.
    package static func subscribeInvalidations(_ receive: @escaping @Sendable (InvalidationReason) -> Void) -> Int {
        let id = Runtime.newID()
        Runtime.send { runtime in runtime.subscribeInvalidations(id, receive) }
        return id
    }
}
