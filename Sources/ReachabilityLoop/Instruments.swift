import CoreMetrics

/// The service's instruments, through swift-metrics: counters, gauges and timers
/// gathered where things happen, exported by whatever `MetricsSystem` the program
/// bootstrapped (the daemon: Prometheus text, docs/metrics.md, "Metrics"). A program that
/// bootstraps nothing (the library inside an application, the tests) gets
/// swift-metrics' no-op handlers, which cost nothing.
///
/// Every metric's name, kind and help text is declared here, once; the exporter
/// reads the help from ``Metric/help``. Handles are made on first use, after the
/// program's `main` bootstrapped its backend.
public enum Instruments {
    /// Every metric the service exports.
    public enum Metric: String, CaseIterable, Sendable {
        case targetReachable = "reachability_target_reachable"
        case targetFlags = "reachability_target_flags"
        case targetChanges = "reachability_target_changes_total"
        case targets = "reachability_targets"
        case pathInterfaces = "reachability_path_interface_usable"
        case backend = "reachability_backend"
        case evaluationSeconds = "reachability_evaluation_seconds"
        case lookupsInFlight = "reachability_lookups_in_flight"
        case clients = "reachability_clients"
        case networkManagerRestarts = "reachability_networkmanager_restarts_total"

        /// The `# HELP` text.
        public var help: String {
            switch self {
            case .targetReachable:
                "Whether a watched target is reachable (1) or not (0); the internet target is kind=\"internet\"."
            case .targetFlags:
                "A watched target's SCNetworkReachabilityFlags as a number; each flag is also a label (1 or 0), "
                    + "with the status and the outgoing interface's type."
            case .targetChanges: "Changes of a watched target's flags since it is watched (StatusChanged signals)."
            case .targets: "Targets watched, by kind."
            case .pathInterfaces:
                "Interfaces a path to the internet may use, while a client holds the path object: 1 usable, 0 not."
            case .backend: "The source of device facts: 1 for the one in use (networkmanager, kernel or none)."
            case .evaluationSeconds: "Time to evaluate every watched target after a change of the network."
            case .lookupsInFlight: "Host name lookups running now."
            case .clients: "Bus connections holding at least one target or the path object."
            case .networkManagerRestarts:
                "Times NetworkManager came back on the bus after it left (its facts used again)."
            }
        }
    }

    /// `reachability_evaluation_seconds`: a histogram of evaluation times.
    public static let evaluation = Timer(label: Metric.evaluationSeconds.rawValue)
    /// `reachability_lookups_in_flight`.
    public static let lookupsInFlight = Gauge(label: Metric.lookupsInFlight.rawValue)
    /// `reachability_clients`.
    public static let clients = Gauge(label: Metric.clients.rawValue)
    /// `reachability_networkmanager_restarts_total`.
    public static let networkManagerRestarts = Counter(label: Metric.networkManagerRestarts.rawValue)
}
