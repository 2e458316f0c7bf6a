import ReachabilityBus
import ReachabilityCore
import ReachabilityPlatform
import ReachabilityLoop

/// The watched targets and who holds them. One object per normalised target,
/// shared by every caller; it disappears (with `InterfacesRemoved`) when its last
/// holder releases it or leaves the bus.
@LoopActor
final class TargetRegistry {
    /// Unowned: the daemon owns the connection, and the connection (through the root
    /// object's Manager interface) owns this registry.
    private unowned let connection: BusConnection
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

    init(connection: BusConnection, requests: EvaluationRequests, perClientLimit: Int, globalLimit: Int) {
        self.connection = connection
        self.requests = requests
        holders = HolderRegistry(perClientLimit: perClientLimit, globalLimit: globalLimit)
    }

    var hostCount: Int { objects.keys.lazy.filter { $0.kind == .host }.count }

    /// The object watching `input`, if any (for `Query`'s fast path).
    func object(for input: TargetInput) -> TargetObject? { objects[input.key] }

    /// The object of an evaluated target, if it is still watched.
    func object(for target: WatchedTarget) -> TargetObject? { objectsByTarget[ObjectIdentifier(target)] }

    /// Makes `client` a holder of `input`'s target, creating the object if needed.
    func watch(_ input: TargetInput, client: String) throws(BusError) -> ObjectPath {
        let key = input.key
        let isFirst: Bool
        do {
            isFirst = try holders.hold(key, client: client)
        } catch {
            throw ServiceError.tooManyTargets(error.message)
        }
        if isFirst || objects[key] == nil {
            let object = TargetObject(WatchedTarget(input), requests: requests)
            objects[key] = object
            keysByPath[key.path] = key
            objectsByTarget[ObjectIdentifier(object.target)] = object
            onCreated?(object)
            object.exported = connection.export(object, at: key.path, interfaces: [TargetObject.interface])
            onAdded?(object)
        }
        return key.path
    }

    /// `client` stops holding the target at `path`.
    func release(_ path: ObjectPath, client: String) throws(BusError) {
        guard let key = keysByPath[path] else {
            throw ServiceError.unknownTarget("\(path.rawValue) is not a watched target")
        }
        let isLast: Bool
        do {
            isLast = try holders.release(key, client: client)
        } catch {
            throw ServiceError.unknownTarget("\(path.rawValue) is not held by \(client)")
        }
        if isLast { remove(key) }
    }

    /// Everything `client` held is released (it left the bus).
    func releaseAll(client: String) {
        for key in holders.releaseAll(client: client) { remove(key) }
    }

    private func remove(_ key: TargetKey) {
        guard let object = objects.removeValue(forKey: key) else { return }
        keysByPath[key.path] = nil
        objectsByTarget[ObjectIdentifier(object.target)] = nil
        onRemoved?(object)
        object.cancel()
        connection.unexport(key.path)
    }
}
