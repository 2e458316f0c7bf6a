import CNetlink
import ReachabilityBus
import ReachabilityCore

/// One watched target (the internet target on the root object) exported with the
/// `…Reachability1.Target` interface. Its owner feeds it evaluated states; it
/// announces what changed: `PropertiesChanged` first, then `StatusChanged` when the
/// flags (or the unknown state) changed.
public final class TargetObject {
    public let kind: TargetKind
    public let name: String
    public private(set) var state: TargetState = .unknown
    /// CLOCK_REALTIME µs of the last change of the flags; 0 before the first answer.
    public private(set) var lastChanged: UInt64 = 0
    var exported: ExportedObject?
    /// Re-evaluates this target now and returns its new state (for `Refresh`).
    var refresh: (() -> TargetState)?

    public init(kind: TargetKind, name: String) {
        self.kind = kind
        self.name = name
    }

    /// Takes a new evaluation and announces what changed.
    public func update(_ new: TargetState) {
        guard new != state else { return }
        let flagsChanged = new.flags != state.flags
        state = new
        if flagsChanged { lastChanged = reach_realtime_usec() }
        exported?.propertiesChanged()
        if flagsChanged {
            exported?.emit(Self.statusChanged, interface: Names.targetInterface,
                           [.int32(new.status.rawValue), .uint32(new.exportedFlags.rawValue)])
        }
    }

    static let statusChanged = Signal("StatusChanged", signature: "iu")

    /// The `…Target` interface: every member declared once, here.
    static let interface = Interface<TargetObject>(
        Names.targetInterface,
        methods: [
            Method("Refresh", output: "ui") { target, _ in
                if let refresh = target.refresh { target.update(refresh()) }
                return [.uint32(target.state.exportedFlags.rawValue), .int32(target.state.status.rawValue)]
            }
        ],
        properties: [
            Property("Kind", "s", emits: .const) { .string($0.kind.rawValue) },
            Property("Name", "s", emits: .const) { .string($0.name) },
            Property("Flags", "u") { .uint32($0.state.exportedFlags.rawValue) },
            Property("Status", "i") { .int32($0.state.status.rawValue) },
            Property("Reachable", "b") { .boolean($0.state.isReachable) },
            Property("ReachableViaWiFi", "b") { .boolean($0.state.isReachableViaWiFi) },
            Property("ReachableViaWWAN", "b") { .boolean($0.state.isReachableViaWWAN) },
            Property("ReachableViaEthernet", "b") { .boolean($0.state.isReachableViaEthernet) },
            Property("ConnectionRequired", "b") { .boolean($0.state.isConnectionRequired) },
            Property("InterfaceType", "s") { .string($0.state.interfaceType.rawValue) },
            Property("Interface", "s") { .string($0.state.interface) },
            Property("Addresses", "as") { .strings($0.state.addresses) },
            Property("Connectivity", "s") { .string($0.state.connectivity.rawValue) },
            Property("Metered", "b") { .boolean($0.state.isMetered) },
            Property("Vpn", "b") { .boolean($0.state.isVPN) },
            Property("ReachableIPv4", "b") { .boolean($0.state.reachableIPv4) },
            Property("ReachableIPv6", "b") { .boolean($0.state.reachableIPv6) },
            Property("Error", "s") { .string($0.state.error) },
            Property("LastChanged", "t") { .uint64($0.lastChanged) },
        ],
        signals: [statusChanged],
        introspection: Names.contract[Names.targetInterface])
}
