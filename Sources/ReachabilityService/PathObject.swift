import ReachabilityBus
import ReachabilityCore
import ReachabilityPlatform
import ReachabilityLoop

/// The paths to the internet per interface, exported at `…/path` with the
/// `…Reachability1.Path` interface while a client holds it (`WatchPath`). Its
/// owner feeds it evaluated states; it announces what changed, to each holder its own
/// paths: a holder whose uid the routing policy's uid rules route otherwise reads and
/// hears the paths its own packets have (`ViewedByUser`, `TargetEvaluator.pathState(uid:)`).
@LoopActor
public final class PathObject {
    public private(set) var state: PathState
    /// Weak: the exported object holds this one (its interface is bound to it), and the
    /// connection holds the exported object while it is on the bus.
    weak var exported: ExportedObject?
    /// Whose paths the views are (`nil` for a view itself).
    private let evaluator: TargetEvaluator?
    /// The views of the users the uid rules route otherwise, per answer class (their
    /// properties are read through `view(for:)`, never exported themselves).
    private var views: [AnswerClass: PathObject] = [:]

    init(state: PathState, evaluator: TargetEvaluator?) {
        self.state = state
        self.evaluator = evaluator
    }

    /// A new evaluation: `PropertiesChanged` with the properties that changed, if any, to
    /// each holder in its own view.
    func update(_ state: PathState) {
        if evaluator?.uidRules.isEmpty ?? true { views.removeAll() }
        guard state != self.state || !views.isEmpty else { return }
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

extension PathObject: ViewedByUser {
    /// The object whose properties callers of `user` read: a view with their own paths when
    /// the uid rules route their packets otherwise, else this.
    public func view(for user: UserID) -> AnyObject {
        guard let evaluator, let answerClass = evaluator.answerClass(of: user) else { return self }
        let state = evaluator.pathState(uid: user)
        if let view = views[answerClass] {
            view.state = state
            return view
        }
        let view = PathObject(state: state, evaluator: nil)
        views[answerClass] = view
        return view
    }
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
