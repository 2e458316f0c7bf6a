import ReachabilityBus

/// The service's names on the bus, each written once.
public enum Names {
    public static let busName = "io.github.reachabilityd.Reachability1"
    public static let rootPath = ObjectPath("/io/github/reachabilityd/Reachability1")
    public static let managerInterface = "io.github.reachabilityd.Reachability1.Manager"
    public static let targetInterface = "io.github.reachabilityd.Reachability1.Target"
    public static let version = "0.1.0"

    /// The interface definitions served as introspection data (from `dbus/`).
    public static let contract = InterfaceContract(xml: contractXML)
}
