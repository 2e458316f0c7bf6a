import ReachabilityRuntime

extension NetworkReachabilityManager {
    /// reachabilityd's metrics in the Prometheus text format (`Metrics.Read`). Root and
    /// the `adm` group only; anybody else gets an error that says so. For tools.
    /// `startingTheService` false: a service that is not running is not started for this.
    public static func daemonMetrics(timeoutMilliseconds: Int32 = 15_000, startingTheService: Bool = true)
        async throws(ReachabilityError) -> String
    {
        try await DaemonMetrics.read(timeoutMilliseconds: timeoutMilliseconds, startingTheService: startingTheService)
    }

    /// The daemon's metrics now, and again after each change it announces
    /// (`Metrics.Follow`, `Metrics.Changed`): never on a timer. When the daemon leaves
    /// the bus an empty text comes, then nothing until it is back (then it is followed
    /// again; the bus does not start it for this). Ends with the
    /// error when the daemon refuses (not root or `adm`), or when the consumer stops.
    public static func daemonMetricsUpdates() -> AsyncThrowingStream<String, any Error> {
        DaemonMetrics.updates()
    }
}

extension NetworkReachabilityManager {
    /// Which connections hold the daemon's targets (`Manager.ListHolders`): every one for
    /// root, the caller's own user's otherwise. For tools.
    public static func daemonHolders() async throws(ReachabilityError) -> [ReachabilityHolder] {
        try await DaemonHolders.list()
    }
}
