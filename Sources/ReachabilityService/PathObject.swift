import ReachabilityBus
import ReachabilityCore
import ReachabilityPlatform
import ReachabilityLoop

/// The paths to the internet per interface, exported at `…/path` with the
/// `…Reachability1.Path` interface while a client holds it (`WatchPath`). Its
/// owner feeds it evaluated states; it announces what changed.
@LoopActor
public final class PathObject {
    public private(set) var state: PathState
    /// Weak: the exported object holds this one (its interface is bound to it), and the
    /// connection holds the exported object while it is on the bus.
    weak var exported: ExportedObject?

    init(state: PathState) {
        self.state = state
    }

    /// A new evaluation: `PropertiesChanged` with the properties that changed, if any.
    func update(_ state: PathState) {
        guard state != self.state else { return }
        self.state = state
        exported?.propertiesChanged()
    }

    /// `Invalidated(reason)`: a connection made before may be broken.
    func invalidated(_ reason: InvalidationReason) {
        exported?.emit(Self.invalidatedSignal, interface: Names.pathInterface, [.string(reason.rawValue)])
    }

    nonisolated static let invalidatedSignal = Signal(Contract.Path.invalidated)

    /// The `…Path` interface: every member declared once, here.
    nonisolated static let interface = Interface<PathObject>(
        Names.pathInterface,
        properties: [
            Property(Contract.Path.interfaces) { .pathInterfaces($0.state.interfaces) },
            Property(Contract.Path.flags) { .uint32($0.state.flags.rawValue) },
            Property(Contract.Path.dnsConfigured) { .boolean($0.state.dnsConfigured) },
            Property(Contract.Path.expensive) { .boolean($0.state.isExpensive) },
            Property(Contract.Path.constrained) { .boolean($0.state.isConstrained) },
            Property(Contract.Path.linkQuality) { .string($0.state.linkQuality.rawValue) },
            Property(Contract.Path.reason) { .string($0.state.reason?.rawValue ?? "") },
            Property(Contract.Path.networkIdentity) { .string($0.state.networkIdentity) },
        ],
        signals: [invalidatedSignal],
        introspection: Names.contract[Names.pathInterface])
}

extension PathInterface {
    /// One entry of `Interfaces`: (name, kernel index, type, vpn, usable IPv4, usable IPv6, gateways).
    var busValue: DBusValue {
        .structure([
            .string(name), .int32(index), .string(type.rawValue), .boolean(isVPN), .boolean(usableIPv4),
            .boolean(usableIPv6), .strings(gateways),
        ])
    }
}

extension DBusValue {
    /// `Interfaces`, typed even when empty.
    static func pathInterfaces(_ interfaces: [PathInterface]) -> DBusValue {
        .array(elementSignature: String(Contract.Path.interfaces.type.dropFirst()), interfaces.map(\.busValue))
    }
}
