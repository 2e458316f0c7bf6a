import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop
import ReachabilityPlatform

/// One target — the internet (root object), a host, an address or an address
/// pair — exported with the `…Reachability1.Target` interface. The evaluator
/// updates its `target`; the daemon's `TargetWiring` (the evaluation's sink)
/// tells it to announce what changed: `PropertiesChanged` first, then
/// `StatusChanged` when the flags (or the unknown state) changed.
@LoopActor
final class TargetObject {
    /// What the evaluator evaluates.
    let target: WatchedTarget
    /// `Refresh` and `Query` on the evaluator (it holds no object: no cycle).
    private let requests: EvaluationRequests
    /// CLOCK_REALTIME µs of the last change of the flags; 0 before the first answer.
    private(set) var lastChanged: UInt64 = 0
    /// The object on the bus. A cycle while it is there (the exported object holds this one:
    /// its interfaces are bound to it), which the registry breaks when it removes the target;
    /// a weak reference cost every target a side table of its own.
    var exported: ExportedObject?
    /// `Refresh` calls waiting for a lookup that starts after they arrived.
    var waitingCalls: [MethodCall] = []

    /// The answer class this object shows (`nil`: the shared answer): a view for the
    /// holders whose uid the routing policy's uid rules route otherwise.
    private let answerClass: AnswerClass?
    /// The views of this target, per answer class (their properties are read through
    /// `view(for:)`, never exported themselves).
    private var views: [AnswerClass: TargetObject] = [:]
    /// A view's flags when it last announced (its `LastChanged` follows them).
    private var shownFlags: ReachabilityFlags?

    init(_ target: WatchedTarget, requests: EvaluationRequests, answerClass: AnswerClass? = nil) {
        self.target = target
        self.requests = requests
        self.answerClass = answerClass
    }

    /// The answer this object shows: its class's, or the shared one.
    var state: TargetState { answerClass.flatMap { target.views[$0] } ?? target.state }

    /// Announces what changed (the state was `old`): to each holder, `PropertiesChanged` with
    /// what changed in its own answer (the shared one, or its user's view), then
    /// `StatusChanged` when that answer's `Flags` or `Status` changed (the interface's
    /// follow-up). A holder that fell behind gets the same once it reads again.
    func announce(from old: TargetState) {
        let now = RealtimeClock.microseconds()
        if state.flags != old.flags { lastChanged = now }
        for view in views.values where view.state.flags != view.shownFlags {
            view.lastChanged = now
            view.shownFlags = view.state.flags
        }
        exported?.propertiesChanged()
    }

    /// A fresh answer: the `Refresh` calls waiting for it get it.
    func answerWaitingCalls() {
        let waiting = waitingCalls
        waitingCalls = []
        for call in waiting { call.reply(refreshReply) }
    }

    /// The reply of `Refresh`: `(u flags, i status)`.
    var refreshReply: [DBusValue] {
        [.uint32(state.exportedFlags.rawValue), .int32(state.status.rawValue)]
    }

    /// Stops any work for this target (it is going away); waiting callers get the last answer.
    func cancel() {
        target.cancel()
        answerWaitingCalls()
    }

    nonisolated static let statusChanged = Signal(Contract.Target.statusChanged)

    /// The `…Target` interface: every member declared once, here.
    nonisolated static let interface = Interface<TargetObject>(
        Names.targetInterface,
        methods: [
            Method(Contract.Target.refresh) { object, call in
                // `nil` means "answered later", not "answer now".
                object.requests.refresh(object, call: call)
            }
        ],
        properties: [
            Property(Contract.Target.kind) { .string($0.target.kind.rawValue) },
            Property(Contract.Target.name) { .string($0.target.name) },
            Property(Contract.Target.flags) { .uint32($0.state.exportedFlags.rawValue) },
            Property(Contract.Target.status) { .int32($0.state.status.rawValue) },
            Property(Contract.Target.reachable) { .boolean($0.state.isReachable) },
            Property(Contract.Target.reachableViaWiFi) { .boolean($0.state.isReachableViaWiFi) },
            Property(Contract.Target.reachableViaWWAN) { .boolean($0.state.isReachableViaWWAN) },
            Property(Contract.Target.reachableViaEthernet) { .boolean($0.state.isReachableViaEthernet) },
            Property(Contract.Target.connectionRequired) { .boolean($0.state.isConnectionRequired) },
            Property(Contract.Target.interfaceType) { .string($0.state.interfaceType.rawValue) },
            Property(Contract.Target.interface) { .string($0.state.interface) },
            Property(Contract.Target.addresses) { .strings($0.state.addresses) },
            Property(Contract.Target.connectivity) { .string($0.state.connectivity.rawValue) },
            Property(Contract.Target.metered) { .boolean($0.state.isMetered) },
            Property(Contract.Target.vpn) { .boolean($0.state.isVPN) },
            Property(Contract.Target.reachableIPv4) { .boolean($0.state.reachableIPv4) },
            Property(Contract.Target.reachableIPv6) { .boolean($0.state.reachableIPv6) },
            Property(Contract.Target.reason) { .string($0.state.reason?.rawValue ?? "") },
            Property(Contract.Target.error) { .string($0.state.error) },
            Property(Contract.Target.lastChanged) { .uint64($0.lastChanged) },
        ],
        signals: [statusChanged],
        // StatusChanged(i status, u flags) follows a change of either (the unknown state has no
        // flags of its own): to holders that read at once, to one that fell behind once it reads.
        followUp: FollowUp(statusChanged, arguments: [Contract.Target.status.name, Contract.Target.flags.name]),
        introspection: Names.contract[Names.targetInterface])
}

extension TargetObject: ViewedByUser {
    /// The object whose properties callers of `user` read: a view with their own answer
    /// when the uid rules route their packets otherwise (`WatchedTarget.views`), else this.
    func view(for user: UserID) -> AnyObject {
        guard answerClass == nil, !target.views.isEmpty,
            let answerClass = requests.evaluator.answerClass(of: user), target.views[answerClass] != nil
        else { return self }
        if let view = views[answerClass] { return view }
        let view = TargetObject(target, requests: requests, answerClass: answerClass)
        view.lastChanged = lastChanged
        view.shownFlags = view.state.flags
        views[answerClass] = view
        return view
    }
}

extension TargetState {
    /// `Query`'s details: `a{sv}` with at least the keys the contract lists.
    var details: DBusValue {
        .vardict(QueryDetail.allCases.map { key in
            let value: DBusValue =
                switch key {
                case .interface: .string(interface)
                case .interfaceType: .string(interfaceType.rawValue)
                case .addresses: .strings(addresses)
                case .connectivity: .string(connectivity.rawValue)
                case .metered: .boolean(isMetered)
                case .vpn: .boolean(isVPN)
                case .reachableIPv4: .boolean(reachableIPv4)
                case .reachableIPv6: .boolean(reachableIPv6)
                case .reason: .string(reason?.rawValue ?? "")
                case .error: .string(error)
                }
            return (key.rawValue, value)
        })
    }
}
