import CoreMetrics
import Glibc
import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop
import ReachabilityPlatform

/// `…Reachability1.Metrics` on the root object: the service's instruments as text
/// (`Read`), and `Changed` to the connections that `Follow` them, once after every
/// change of a target's state, of the paths or of the backend (never on a timer).
/// Root and the `adm` group only (the policy says so too): the names a user watches
/// are as private as the names it looks up.
///
/// The per-target instruments live here: a target's reachability and flags (each
/// flag a label), and its changes; they go when the target goes.
@LoopActor
final class MetricsObject {
    /// The exporter's text (Prometheus), chosen in `main`; `nil`: no exporter.
    private let render: (@Sendable () -> String)?
    /// Weak: the connection holds the exported object, which holds this one.
    weak var exported: ExportedObject?
    private var followers: Set<String> = []
    private var announcement: SourceHandle?
    private var instruments: [ObjectIdentifier: TargetInstruments] = [:]
    private var backendGauges: [BackendKind: Gauge] = [:]
    private var pathGauges: [String: Gauge] = [:]
    /// What the snapshot gauges count, asked for when the text is read.
    var counts: () -> (targets: [TargetKind: Int], clients: Int) = { ([:], 0) }

    init(render: (@Sendable () -> String)?) {
        self.render = render
        // Shown from the start (at 0), so a query need not tell "none yet" from "not exported".
        Instruments.networkManagerRestarts.increment(by: 0)
    }

    /// The `…Metrics` interface: every member declared once, here.
    nonisolated static let interface = Interface<MetricsObject>(
        Names.metricsInterface,
        methods: [
            Method(Contract.Metrics.read) { metrics, call throws(BusError) in
                guard let render = metrics.render else {
                    throw BusError(name: "org.freedesktop.DBus.Error.NotSupported",
                                   message: "this reachabilityd was started without a metrics exporter")
                }
                MetricsObject.admit(call) { [weak metrics] in
                    guard let metrics else { return }
                    metrics.refreshCounts()
                    call.reply([.string(render())])
                }
                return nil
            },
            Method(Contract.Metrics.follow) { metrics, call throws(BusError) in
                MetricsObject.admit(call) { [weak metrics] in
                    metrics?.followers.insert(call.sender)
                    call.reply([])
                }
                return nil
            },
        ],
        signals: [changed],
        introspection: Names.contract[Names.metricsInterface])

    nonisolated static let changed = Signal(Contract.Metrics.changed)

    /// Root, or a caller in the `adm` group (who reads the journal too): `then` runs when
    /// the caller is admitted; otherwise the call is refused. The groups are the
    /// caller's as the kernel gave them to the bus (`GetConnectionCredentials`), so
    /// `SupplementaryGroups=adm` in a unit counts, and a group added to /etc/group
    /// after the caller logged in does not; never `getgrouplist` of the user's name.
    private static func admit(_ call: MethodCall, then: @escaping @LoopActor () -> Void) {
        guard call.user != 0 else { return then() }
        guard let group = getgrnam("adm") else {
            return call.fail(refusal(call, "this system has no adm group"))
        }
        let adm = UInt32(group.pointee.gr_gid)
        call.callerGroups { groups in
            guard let groups else {
                return call.fail(refusal(call, "the bus did not give the caller's groups"))
            }
            if groups.contains(adm) { then() } else { call.fail(refusal(call, nil)) }
        }
    }

    /// The one sentence a refused caller reads (reachctl prints it as it is).
    private static func refusal(_ call: MethodCall, _ why: String?) -> BusError {
        .accessDenied("the metrics are for root and the adm group; uid \(call.user) is in neither"
                      + (why.map { " (\($0))" } ?? ""))
    }

    // MARK: What changes

    /// A target is watched (the internet target: at start).
    func targetAdded(_ target: WatchedTarget) {
        let made = TargetInstruments(target)
        instruments[ObjectIdentifier(target)] = made
        changed()
    }

    func targetChanged(_ target: WatchedTarget) {
        instruments[ObjectIdentifier(target)]?.changed()
        changed()
    }

    func targetRemoved(_ target: WatchedTarget) {
        instruments.removeValue(forKey: ObjectIdentifier(target))?.remove()
        changed()
    }

    func backendChanged(to kind: BackendKind, networkManagerBack: Bool) {
        if networkManagerBack { Instruments.networkManagerRestarts.increment() }
        for candidate in [BackendKind.none, .networkManager, .kernel] {
            let gauge = backendGauges[candidate] ?? Gauge(label: Instruments.Metric.backend.rawValue,
                                                          dimensions: [("backend", candidate.rawValue)])
            backendGauges[candidate] = gauge
            gauge.record(candidate == kind ? 1 : 0)
        }
        changed()
    }

    func pathChanged(_ state: PathState) {
        var seen: Set<String> = []
        for interface in state.interfaces {
            let dimensions = [
                ("interface", interface.name), ("type", interface.type.rawValue), ("vpn", interface.isVPN ? "1" : "0"),
            ]
            let key = dimensions.map(\.1).joined(separator: "/")
            seen.insert(key)
            let gauge = pathGauges[key] ?? Gauge(label: Instruments.Metric.pathInterfaces.rawValue,
                                                 dimensions: dimensions)
            pathGauges[key] = gauge
            gauge.record(interface.isUsable ? 1 : 0)
        }
        for (key, gauge) in pathGauges where !seen.contains(key) {
            gauge.destroy()
            pathGauges[key] = nil
        }
        changed()
    }

    /// A connection left the bus: it follows nothing any more.
    func releaseAll(client: String) { followers.remove(client) }

    /// `Changed` once, after the events pending now (a burst of changes is one signal).
    private func changed() {
        guard !followers.isEmpty, announcement == nil else { return }
        announcement = Sources.idle { [unowned self] in
            self.announcement = nil
            self.exported?.emit(MetricsObject.changed, interface: Names.metricsInterface, [], to: Array(self.followers))
        }
    }

    private func refreshCounts() {
        for target in instruments.values { target.export() }
        let (targets, clients) = counts()
        for kind in TargetKind.allCases {
            Gauge(label: Instruments.Metric.targets.rawValue, dimensions: [("kind", kind.metricLabel)])
                .record(targets[kind] ?? 0)
        }
        Instruments.clients.record(clients)
    }
}

/// One target's instruments: reachable (stable labels, for alerts), flags (a label per
/// flag, so the series changes with them), changes. The change is counted and the state
/// kept where it happens; the series are made (and brought up to date) when the metrics
/// are read, so a daemon nobody scrapes, or a client adding and dropping thousands of
/// targets between two reads, costs the registry nothing — and the target only a few
/// words until then (its state and labels are read from it when the metrics are).
@LoopActor
final class TargetInstruments {
    /// Unowned: the instruments go (`targetRemoved`) before the target does.
    private unowned let target: WatchedTarget
    private var changeCount = 0
    private var exportedChanges = 0
    private var isCurrent = false
    private var reachable: Gauge?
    private var changes: Counter?
    private var flags: Gauge?
    private var flagLabels: [String] = []

    init(_ target: WatchedTarget) {
        self.target = target
    }

    private var dimensions: [(String, String)] {
        target.spec.metricLabels
    }

    /// The target's state changed (a StatusChanged): counted, and exported at the next read.
    func changed() {
        changeCount += 1
        isCurrent = false
    }

    /// Brings the series up to date (made on the first read).
    func export() {
        guard !isCurrent else { return }
        isCurrent = true
        let state = target.state
        let dimensions = self.dimensions
        let reachable = self.reachable ?? Gauge(label: Instruments.Metric.targetReachable.rawValue,
                                                dimensions: dimensions)
        let changes = self.changes ?? Counter(label: Instruments.Metric.targetChanges.rawValue,
                                              dimensions: dimensions)
        self.reachable = reachable
        self.changes = changes
        reachable.record(state.isReachable ? 1 : 0)
        changes.increment(by: changeCount - exportedChanges)
        exportedChanges = changeCount
        let bits = state.exportedFlags
        var labels = dimensions
        for (flag, name) in Self.flagNames { labels.append((name, bits.contains(flag) ? "1" : "0")) }
        labels.append(("status", "\(state.status.rawValue)"))
        labels.append(("interface_type", state.interfaceType == .none ? "none" : state.interfaceType.rawValue))
        let values = labels.map(\.1)
        if values != flagLabels {
            flags?.destroy()
            flags = Gauge(label: Instruments.Metric.targetFlags.rawValue, dimensions: labels)
            flagLabels = values
        }
        flags?.record(Int(bits.rawValue))
    }

    func remove() {
        reachable?.destroy()
        changes?.destroy()
        flags?.destroy()
    }

    /// The flags as label names (Prometheus style of scutil's names).
    static let flagNames: [(ReachabilityFlags, String)] = [
        (.transientConnection, "transient_connection"), (.reachable, "reachable"),
        (.connectionRequired, "connection_required"), (.connectionOnTraffic, "connection_on_traffic"),
        (.interventionRequired, "intervention_required"), (.connectionOnDemand, "connection_on_demand"),
        (.isLocalAddress, "is_local_address"), (.isDirect, "is_direct"), (.isWWAN, "is_wwan"),
    ]
}
