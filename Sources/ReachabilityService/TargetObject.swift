import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop
import ReachabilityPlatform

/// Something that can re-evaluate a target on demand (`Refresh`).
protocol TargetRefreshing: AnyObject {
    /// Re-evaluates `target`; returns the reply now, or `nil` and answers `call` later.
    func refresh(_ target: TargetObject, call: MethodCall) -> [DBusValue]?
}

/// One target — the internet (root object), a host or an address — exported
/// with the `…Reachability1.Target` interface. Its owner feeds it evaluated
/// states; it announces what changed: `PropertiesChanged` first, then
/// `StatusChanged` when the flags (or the unknown state) changed.
public final class TargetObject: WatchedTarget {
    /// CLOCK_REALTIME µs of the last change of the flags; 0 before the first answer.
    public private(set) var lastChanged: UInt64 = 0
    /// Weak: the exported object holds this one (its interfaces are bound to it), and the
    /// connection holds the exported object while it is on the bus.
    weak var exported: ExportedObject?
    weak var refresher: TargetRefreshing?
    /// `Refresh` calls waiting for a lookup that starts after they arrived.
    var waitingCalls: [MethodCall] = []

    /// Announces what changed.
    public override func didChange(from old: TargetState) {
        let flagsChanged = state.flags != old.flags
        if flagsChanged { lastChanged = RealtimeClock.microseconds() }
        exported?.propertiesChanged()
        if flagsChanged {
            exported?.emit(Self.statusChanged, interface: Names.targetInterface,
                           [.int32(state.status.rawValue), .uint32(state.exportedFlags.rawValue)])
        }
    }

    /// A fresh answer: the `Refresh` calls waiting for it get it.
    public override func lookupSettled() { answerWaitingCalls() }

    private func answerWaitingCalls() {
        let waiting = waitingCalls
        waitingCalls = []
        for call in waiting { call.reply(refreshReply) }
    }

    /// The reply of `Refresh`: `(u flags, i status)`.
    var refreshReply: [DBusValue] {
        [.uint32(state.exportedFlags.rawValue), .int32(state.status.rawValue)]
    }

    /// Stops any work for this target (it is going away); waiting callers get the last answer.
    public override func cancel() {
        super.cancel()
        answerWaitingCalls()
    }

    static let statusChanged = Signal("StatusChanged", signature: "iu")

    /// The `…Target` interface: every member declared once, here.
    static let interface = Interface<TargetObject>(
        Names.targetInterface,
        methods: [
            Method("Refresh", output: "ui") { target, call in
                // `nil` from the refresher means "answered later", not "answer now".
                guard let refresher = target.refresher else { return target.refreshReply }
                return refresher.refresh(target, call: call)
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

extension TargetState {
    /// `Query`'s details: `a{sv}` with at least the keys the contract lists.
    var details: DBusValue {
        .vardict([
            ("interface", .string(interface)),
            ("interface-type", .string(interfaceType.rawValue)),
            ("addresses", .strings(addresses)),
            ("connectivity", .string(connectivity.rawValue)),
            ("metered", .boolean(isMetered)),
            ("vpn", .boolean(isVPN)),
            ("reachable-ipv4", .boolean(reachableIPv4)),
            ("reachable-ipv6", .boolean(reachableIPv6)),
            ("error", .string(error)),
        ])
    }
}
