/// A network interface a path can use, as the Network framework's
/// `NWInterface` describes it: the kernel's name and index and its kind.
public struct NWInterface: Hashable, Sendable, CustomDebugStringConvertible {
    /// The kinds of interface the Network framework names.
    public enum InterfaceType: Hashable, Sendable {
        /// Anything else: Bluetooth, a VPN or tunnel, a bridge, a virtual link.
        case other
        /// Wi-Fi (NetworkManager's Wi-Fi devices, or a kernel wireless link).
        case wifi
        /// Mobile broadband (a modem managed by NetworkManager, `wwan` links).
        case cellular
        /// Ethernet.
        case wiredEthernet
        /// The loopback interface (never in a path's `availableInterfaces`).
        case loopback
    }

    /// The kernel's name for the interface ("wlan0").
    public let name: String
    /// The kernel's interface index.
    public let index: Int
    /// The kind of the interface.
    public let type: InterfaceType

    init(name: String, index: Int, type: InterfaceType) {
        self.name = name
        self.index = index
        self.type = type
    }

    public var debugDescription: String { name }
}
