import ReachabilityCore
import ReachabilityLoop

/// The per-interface paths as a feed's topic: one feed per backend, shared by every path
/// monitor in this process, through the same `Feed` and `Subscription` as a target's.
package struct PathKey: FeedTopic {
    package init() {}

    package static var initialState: PathUpdate { PathUpdate() }
    package var answerWithoutBackend: PathUpdate? { nil }
    package var logName: String { "the path" }
    package static func open(_ feed: Feed<PathKey>, in backend: any FeedBackend) { backend.openPath(feed) }
    package static func close(_ feed: Feed<PathKey>, in backend: any FeedBackend) { backend.closePath(feed) }
}

/// What the path feed carries: the paths, and the invalidations (`Path.Invalidated`) so far.
package struct PathUpdate: Equatable, Sendable {
    /// The per-interface paths (with `PathState.invalidations` counted here).
    package var path = PathState.none
    /// How many invalidations the feed has passed on (a new one is a new state).
    package var invalidationCount = 0
    /// The reason of the last of them.
    package var lastInvalidation: InvalidationReason?
    /// The last network that had an identity.
    var lastNetwork = ""

    package init(path: PathState = .none, invalidationCount: Int = 0, lastInvalidation: InvalidationReason? = nil) {
        self.path = path
        self.invalidationCount = invalidationCount
        self.lastInvalidation = lastInvalidation
    }

    /// This update with a new state from the backend. A state on another network than the last
    /// one (`networkIdentity`; not a flap back to the same) is a new path even when nothing else
    /// differs (`PathState.invalidations`), as Apple's monitor delivers a new path on a gateway change.
    func with(_ new: PathState) -> PathUpdate {
        var next = self
        next.path = new
        next.path.invalidations = path.invalidations
        if !new.networkIdentity.isEmpty {
            if !lastNetwork.isEmpty && new.networkIdentity != lastNetwork { next.path.invalidations &+= 1 }
            next.lastNetwork = new.networkIdentity
        }
        return next
    }
}

extension Feed where Key == PathKey {
    /// A new state from the backend; `isAnswer` once it is a real answer.
    func publish(_ path: PathState, isAnswer: Bool) { publish(state.with(path), isAnswer: isAnswer) }

    /// A connection made before may be broken (`Path.Invalidated`): a new update, for those that
    /// follow invalidations. (Another network is a new path already: `publish`.) Before the first
    /// answer nobody hears it, as nobody hears anything.
    func invalidate(_ reason: InvalidationReason) {
        var next = state
        next.invalidationCount += 1
        next.lastInvalidation = reason
        publish(next, isAnswer: false)
    }
}
