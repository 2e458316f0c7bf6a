import Logging
import ReachabilityBus
import ReachabilityCore
import ReachabilityFairness
import ReachabilityPlatform
import ReachabilityLoop

/// The watched targets and who holds them. One object per normalised target,
/// shared by every caller; it disappears (with `InterfacesRemoved`) when its last
/// holder releases it or leaves the bus.
///
/// A target is seen by the users whose connections hold it (and by root): its
/// `InterfacesAdded`, `PropertiesChanged`, `StatusChanged` and
/// `InterfacesRemoved` go to its holders, and anybody else is answered as if
/// it did not exist. Its path stays deterministic.
@LoopActor
final class TargetRegistry {
    /// Unowned: the daemon owns the connection, and the connection (through the root
    /// object's Manager interface) owns this registry.
    private unowned let connection: any ObjectExporter
    private var holders: HolderRegistry<TargetKey>
    private(set) var objects: [TargetKey: TargetObject] = [:]
    private var keysByPath: [ObjectPath: TargetKey] = [:]
    /// The object of each evaluated target (what the evaluator reports on).
    private var objectsByTarget: [ObjectIdentifier: TargetObject] = [:]
    private let requests: EvaluationRequests
    /// Called for a new target before it is exported, to give it its real first state:
    /// `InterfacesAdded` carries that state, and nothing changes before the caller's reply.
    var onCreated: ((TargetObject) -> Void)?
    /// Called for a new target after it is exported, and for a removed one before it is unexported.
    var onAdded: ((TargetObject) -> Void)?
    var onRemoved: ((TargetObject) -> Void)?
    /// A client became a holder of an object that was there already (its user may need
    /// an answer of its own).
    var onHeld: ((TargetObject) -> Void)?
    /// Hears of a client over its limit.
    private let logger: Logger

    init(connection: any ObjectExporter, requests: EvaluationRequests, perClientLimit: Int, perUserLimit: Int,
         globalLimit: Int, logger: Logger) {
        self.connection = connection
        self.requests = requests
        self.logger = logger
        holders = HolderRegistry(perClientLimit: perClientLimit, perUserLimit: perUserLimit, globalLimit: globalLimit)
    }

    /// The number of targets whose names are looked up (`WatchedTarget.host`): kept, not
    /// counted, as it is asked on every change.
    private(set) var hostCount = 0
    /// Targets whose last holder left, to be removed a batch at a time.
    private var orphans = Ring<TargetKey>()
    private var removals: SourceHandle?
    /// The removals under way: how many so far, since when (logged when there were many).
    private var removalRun: (count: Int, started: ContinuousClock.Instant)?
    /// The most targets watched at once since memory was last given back.
    private var peak = 0
    /// The clients whose refusal was logged (`Log.Event.clientOverLimit`).
    private var overLimit: Set<String> = []

    /// The connections holding at least one target.
    var clients: Dictionary<String, Set<TargetKey>>.Keys { holders.clients }

    /// The object watching `input`, if any (for `Query`'s fast path).
    func object(for input: TargetInput) -> TargetObject? { objects[input.key] }

    /// The object of an evaluated target, if it is still watched.
    func object(for target: WatchedTarget) -> TargetObject? { objectsByTarget[ObjectIdentifier(target)] }

    /// Makes `client`, a connection of `user`, a holder of `input`'s target, creating the
    /// object if needed; a new holder gets `InterfacesAdded` for it.
    func watch(_ input: TargetInput, client: String, user: UserID) throws(BusError) -> ObjectPath {
        let key = input.key
        let wasHolder = holders.isHolder(client, of: key)
        do {
            // Whether it is the first holder does not matter: the object may still exist (its
            // last holder left and it waits for its removal).
            _ = try holders.hold(key, client: client, user: user)
        } catch {
            // Once per client (until it leaves): a client that keeps trying does not flood the log.
            if overLimit.insert(client).inserted {
                logger.notice("\(client) (uid \(user)) is over its limit: \(error.message)",
                              metadata: .event(.clientOverLimit,
                                               ["client": "\(client)", "target": "\(input.name)", "uid": "\(user)"]))
            }
            throw ServiceError.tooManyTargets(error.message)
        }
        if objects[key] == nil {
            // One path string for the registry, the tree and the object (each made anew
            // would be three of some 80 bytes per target).
            let path = key.path
            let target = WatchedTarget(input, owner: user)
            let object = TargetObject(target, requests: requests)
            objects[key] = object
            keysByPath[path] = key
            objectsByTarget[ObjectIdentifier(object.target)] = object
            if target.host != nil { hostCount += 1 }
            onCreated?(object)
            object.exported = connection.export(at: path, interfaces: [TargetObject.interface.bound(to: object)],
                                                audience: Holders(registry: self, key: key))
            peak = max(peak, objects.count)
            onAdded?(object)
            return path
        } else if !wasHolder {
            // Shared, or held again before its removal after its last holder left: it stays.
            connection.announceAdded(key.path, to: [client])
            if let object = objects[key] { onHeld?(object) }
        }
        return key.path
    }

    /// Each target and connection holding it, with the connection's user, sorted by path
    /// then name: every one for root, else only the connections of `user` itself.
    func holdings(seenBy user: UserID) -> [(path: ObjectPath, client: String, user: UserID)] {
        var rows: [(path: ObjectPath, client: String, user: UserID)] = []
        for (path, key) in keysByPath {
            for client in holders.holders(of: key) {
                guard let owner = holders.user(of: client), user == 0 || owner == user else { continue }
                rows.append((path, client, owner))
            }
        }
        return rows.sorted { ($0.path.rawValue, $0.client) < ($1.path.rawValue, $1.client) }
    }

    /// `client` stops holding the target at `path`; it gets `InterfacesRemoved` for it.
    /// A target it does not hold is unknown to it, whether somebody else holds it or not.
    func release(_ path: ObjectPath, client: String) throws(BusError) {
        guard let key = keysByPath[path], let isLast = try? holders.release(key, client: client) else {
            throw ServiceError.unknownTarget("\(path.rawValue) is not a target this connection holds")
        }
        if isLast {
            remove(key, announcingTo: [client])
            compactAfterPeak()
        } else {
            connection.announceRemoved(key.path, to: [client])
        }
    }

    /// Everything `client` held is released (it left the bus: nobody to tell). Its holds go
    /// at once; the objects nobody holds any more go `removalBatch` at a time, between
    /// other users' calls, so a client leaving with thousands of targets delays nobody
    /// by more than one batch.
    func releaseAll(client: String) {
        overLimit.remove(client)
        for key in holders.releaseAll(client: client) where objects[key] != nil {
            orphans.append(key)
        }
        guard !orphans.isEmpty, removals == nil else { return }
        // No removal under way (its end empties both): a run starts.
        removalRun = (0, .now)
        removals = Sources.idle { [unowned self] in self.removeOrphans() }
    }

    static let removalBatch = ServiceLimits.standard.removalBatch

    private func removeOrphans() {
        removals = nil
        var removed = 0
        while removed < Self.removalBatch, let key = orphans.popFirst() {
            // Held again meanwhile (by whoever watched it since): it stays.
            guard !holders.contains(key) else { continue }
            remove(key, announcingTo: [])
            removed += 1
        }
        removalRun?.count += removed
        if !orphans.isEmpty {
            removals = Sources.idle { [unowned self] in self.removeOrphans() }
            return
        }
        compactAfterPeak()
        if let run = removalRun, run.count > Self.removalBatch {
            let milliseconds = (ContinuousClock.now - run.started) / .milliseconds(1)
            logger.info("removed \(run.count) targets that clients which left held, in \(Int(milliseconds)) ms")
        }
        removalRun = nil
    }

    /// After a peak (a quarter of the targets are left), gives its memory back.
    private func compactAfterPeak() {
        guard peak >= 512, objects.count <= peak / 4 else { return }
        peak = objects.count
        holders.compact()
        objects.shrinkIfSparse()
        keysByPath.shrinkIfSparse()
        objectsByTarget.shrinkIfSparse()
        connection.compactObjects()
        requests.evaluator.compactRoutes()
        Memory.trimSoon()
    }

    /// Whether callers of `user` may see the target at `key`.
    fileprivate func admits(_ user: UserID, to key: TargetKey) -> Bool { holders.isHeld(key, byUser: user) }

    fileprivate func holderNames(of key: TargetKey) -> [String] { holders.holderList(of: key) }

    fileprivate func isHolder(_ client: String, of key: TargetKey) -> Bool { holders.isHolder(client, of: key) }

    /// The users holding `key`, each with its clients.
    func holdersByUser(of key: TargetKey) -> [UserID: [String]] { holders.holdersByUser(of: key) }

    private func remove(_ key: TargetKey, announcingTo listeners: [String]) {
        guard let object = objects.removeValue(forKey: key) else { return }
        keysByPath[key.path] = nil
        objectsByTarget[ObjectIdentifier(object.target)] = nil
        if object.target.host != nil { hostCount -= 1 }
        onRemoved?(object)
        object.cancel()
        connection.unexport(key.path, to: listeners)
        object.exported = nil  // the cycle with its exported object ends here
    }
}

/// A target's audience: the users holding it see it, its holders hear its signals.
@LoopActor
private final class Holders: ObjectAudience {
    /// Unowned: the registry outlives its objects (it unexports them all before it goes).
    unowned let registry: TargetRegistry
    let key: TargetKey

    init(registry: TargetRegistry, key: TargetKey) {
        self.registry = registry
        self.key = key
    }

    func admits(_ user: UserID) -> Bool { registry.admits(user, to: key) }

    var listeners: [String] { registry.holderNames(of: key) }

    func hears(_ peer: String) -> Bool { registry.isHolder(peer, of: key) }

    var listenersByUser: [UserID: [String]] { registry.holdersByUser(of: key) }
}
