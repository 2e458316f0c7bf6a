import ReachabilityBus
import ReachabilityCore

/// The service's names on the bus (written once, in `ServiceNames`), as the daemon uses them.
public enum Names {
    public static let busName = ServiceNames.busName
    public static let rootPath = ObjectPath(rawValue: ServiceNames.rootPath)!
    public static let managerInterface = ServiceNames.managerInterface
    public static let targetInterface = ServiceNames.targetInterface
    public static let pathInterface = ServiceNames.pathInterface
    public static let metricsInterface = ServiceNames.metricsInterface
    public static let pathPath = ObjectPath(rawValue: ServiceNames.pathPath)!
    public static let version = ServiceNames.version
    /// systemd's log control interface, at the path systemd looks for it.
    public static let logControlInterface = Contract.LogControl1.interfaceName
    public static let logControlPath = ObjectPath(rawValue: "/org/freedesktop/LogControl1")!

    /// The interface definitions served as introspection data (from `dbus/`).
    public static let contract = InterfaceContract(xml: Contract.xml)
}
