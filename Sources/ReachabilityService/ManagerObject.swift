import ReachabilityBus
import ReachabilityCore
import ReachabilityPlatform
import ReachabilityLoop

/// The service itself, exported on the root object with `…Reachability1.Manager`:
/// watching, releasing and querying targets.
@LoopActor
public final class ManagerObject {
    public var backend: BackendKind = .none {
        didSet { if backend != oldValue { exported?.propertiesChanged() } }
    }
    /// Weak: the exported object holds this one (its interfaces are bound to it), and the
    /// connection holds the exported object while it is on the bus.
    weak var exported: ExportedObject?
    let registry: TargetRegistry
    let paths: PathRegistry
    let requests: EvaluationRequests

    /// The daemon's network namespace, read once: a process never changes its own.
    static let networkNamespace = NetworkNamespace.current()

    init(registry: TargetRegistry, paths: PathRegistry, requests: EvaluationRequests) {
        self.registry = registry
        self.paths = paths
        self.requests = requests
    }

    /// The `…Manager` interface: every member declared once, here.
    nonisolated static let interface = Interface<ManagerObject>(
        Names.managerInterface,
        methods: [
            Method(Contract.Manager.watchHost) { manager, call throws(BusError) in
                let input = try TargetInput.validHost(try call.string(0))
                return [.objectPath(try manager.registry.watch(input, client: call.sender, user: call.user))]
            },
            Method(Contract.Manager.watchAddress) { manager, call throws(BusError) in
                let input = try TargetInput.validAddress(try call.string(0))
                return [.objectPath(try manager.registry.watch(input, client: call.sender, user: call.user))]
            },
            Method(Contract.Manager.watchAddressPair) { manager, call throws(BusError) in
                let input = try TargetInput.validPair(local: try call.string(0), remote: try call.string(1))
                return [.objectPath(try manager.registry.watch(input, client: call.sender, user: call.user))]
            },
            Method(Contract.Manager.watchPath) { manager, call in
                [.objectPath(manager.paths.watch(client: call.sender, user: call.user))]
            },
            Method(Contract.Manager.listHolders) { manager, call in
                let rows = manager.registry.holdings(seenBy: call.user).map {
                    DBusValue.structure([.objectPath($0.path), .string($0.client), .uint32($0.user)])
                }
                return [.array(elementSignature: "(osu)", rows)]
            },
            Method(Contract.Manager.release) { manager, call throws(BusError) in
                let path = try call.objectPath(0)
                if path == Names.pathPath {
                    try manager.paths.release(client: call.sender)
                } else {
                    try manager.registry.release(path, client: call.sender)
                }
                return []
            },
            Method(Contract.Manager.query) { manager, call throws(BusError) in
                let text = try call.string(0)
                let input = text.isEmpty ? .internet(nil) : try TargetInput.validHost(text)
                return try manager.requests.query(input, watched: manager.registry.object(for: input), call: call)
            },
        ],
        properties: [
            Property(Contract.Manager.backend) { .string($0.backend.rawValue) },
            Property(Contract.Manager.version) { _ in .string(Names.version) },
            Property(Contract.Manager.networkNamespace) { _ in .uint64(ManagerObject.networkNamespace) },
        ],
        introspection: Names.contract[Names.managerInterface])
}
