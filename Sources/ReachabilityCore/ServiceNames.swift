/// The service's names on the bus, each written once; the daemon exports them
/// and the client library calls them. Interface and member names come from the
/// contract itself (`Contract`, generated from `dbus/`).
public enum ServiceNames {
    public static let busName = "io.github.reachabilityd.Reachability1"
    public static let rootPath = "/io/github/reachabilityd/Reachability1"
    public static let managerInterface = Contract.Manager.interfaceName
    public static let targetInterface = Contract.Target.interfaceName
    public static let pathInterface = Contract.Path.interfaceName
    public static let metricsInterface = Contract.Metrics.interfaceName
    /// The object with the Path interface, while a client holds it (`WatchPath`).
    public static let pathPath = "/io/github/reachabilityd/Reachability1/path"
    public static let version = "0.2.0"

    /// The service's own D-Bus error names.
    public enum Error {
        static let prefix = "io.github.reachabilityd.Reachability1.Error."
        /// The input is not a valid host name or address.
        public static let invalidTarget = prefix + "InvalidTarget"
        /// A per-client or global limit on watched targets is reached.
        public static let tooManyTargets = prefix + "TooManyTargets"
        /// The caller does not hold that target.
        public static let unknownTarget = prefix + "UnknownTarget"
    }
}
