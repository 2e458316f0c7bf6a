import ReachabilityBus
import ReachabilityCore

/// The service itself, exported on the root object with `…Reachability1.Manager`.
public final class ManagerObject {
    public var backend: BackendKind = .none {
        didSet { if backend != oldValue { exported?.propertiesChanged() } }
    }
    var exported: ExportedObject?

    public init() {}

    /// The `…Manager` interface: every member declared once, here.
    static let interface = Interface<ManagerObject>(
        Names.managerInterface,
        properties: [
            Property("Backend", "s") { .string($0.backend.rawValue) },
            Property("Version", "s", emits: .const) { _ in .string(Names.version) },
        ],
        introspection: Names.contract[Names.managerInterface])
}
