import ReachabilityBus
import ReachabilityCore
import ReachabilityFairness
import ReachabilityPlatform
import ReachabilityLoop

/// Who holds the path object (`WatchPath`), tracked by unique name like the
/// targets' holders but apart from them: it counts against no target limit.
/// The object exists, and the evaluator computes its facts, exactly while it
/// has a holder; it disappears (with `InterfacesRemoved`) when its last holder
/// releases it or leaves the bus.
@LoopActor
final class PathRegistry {
    /// Unowned: the daemon owns the connection, and the connection (through the root
    /// object's Manager interface) owns this registry.
    private unowned let connection: any ObjectExporter
    private let evaluator: TargetEvaluator
    /// One key, the path object's path: a client holds it or not.
    private var holders = HolderRegistry<ObjectPath>(perClientLimit: 1, globalLimit: 1)
    private(set) var object: PathObject?

    init(connection: any ObjectExporter, evaluator: TargetEvaluator) {
        self.connection = connection
        self.evaluator = evaluator
    }

    /// Makes `client` a holder; the first holder gets an object evaluated before it is exported.
    /// The connections holding the path object.
    var clients: Set<String> { holders.holders(of: Names.pathPath) }

    func watch(client: String, user: UserID) -> ObjectPath {
        // No limit can be reached: one key, held at most once per client.
        _ = try? holders.hold(Names.pathPath, client: client, user: user)
        if object == nil {
            evaluator.isPathWanted = true
            let object = PathObject(state: evaluator.pathState, evaluator: evaluator)
            self.object = object
            object.exported = connection.export(at: Names.pathPath, interfaces: [PathObject.interface.bound(to: object)],
                                                audience: PathHolders(registry: self))
        }
        return Names.pathPath
    }

    /// `client` stops holding the path object.
    func release(client: String) throws(BusError) {
        let isLast: Bool
        do {
            isLast = try holders.release(Names.pathPath, client: client)
        } catch {
            throw ServiceError.unknownTarget("\(Names.pathPath.rawValue) is not held by \(client)")
        }
        if isLast { remove(announcingTo: [client]) }
    }

    /// `client` left the bus.
    func releaseAll(client: String) {
        if !holders.releaseAll(client: client).isEmpty { remove(announcingTo: [client]) }
    }

    /// The last holder, `listeners`, let it go: `InterfacesRemoved` to it.
    private func remove(announcingTo listeners: [String]) {
        guard object != nil else { return }
        object = nil
        evaluator.isPathWanted = false
        connection.unexport(Names.pathPath, to: listeners)
    }

    /// The holders, each with its user.
    fileprivate var holdersByUser: [UserID: [String]] { holders.holdersByUser(of: Names.pathPath) }

    fileprivate var holderList: [String] { holders.holderList(of: Names.pathPath) }

    fileprivate func isHolder(_ client: String) -> Bool { holders.isHolder(client, of: Names.pathPath) }
}

/// The path object's audience: everybody may read it (each user its own paths), its holders
/// hear its signals, each in its own user's view.
@LoopActor
private final class PathHolders: ObjectAudience {
    /// Unowned: the registry unexports the object before it goes.
    unowned let registry: PathRegistry

    init(registry: PathRegistry) { self.registry = registry }

    func admits(_ user: UserID) -> Bool { true }

    var listeners: [String] { registry.holderList }

    func hears(_ peer: String) -> Bool { registry.isHolder(peer) }

    var listenersByUser: [UserID: [String]] { registry.holdersByUser }
}
