/// How well the link layer of the preferred interface can carry traffic, as
/// exported in the `Path` interface's `LinkQuality` and read by `NWPath.linkQuality`.
/// Apple's meaning: an estimate to tune the starting values of algorithms that
/// scale with the network (a first bit rate, a buffer), never a reason to refuse
/// a connection.
///
/// Linux has two measurements: the signal strength of a Wi-Fi device's access
/// point (NetworkManager, 0–100 %) and a modem's signal quality (ModemManager,
/// 0–100 %). Both map to a quality by one table (`init(signal:)`); which
/// interface's measurement counts is `Engine.linkQuality`'s rule.
public enum LinkQuality: String, Sendable, Hashable, CaseIterable {
    /// No measurement: no usable interface, a radio whose signal is not known, a
    /// tunnel, Bluetooth or another link with no signal of its own.
    case unknown
    /// 0–30 %: at most one of nmcli's four signal bars.
    case minimal
    /// 31–55 %: two bars.
    case moderate
    /// 56–100 %: three or four bars; and wired Ethernet with carrier.
    case good

    /// The lowest signal (in %) of each quality, from the highest: nmcli's
    /// bars (`nm_utils_wifi_strength_bars`: more than 55 % is three bars, more
    /// than 30 % two), the same thresholds for a modem, whose percentage
    /// ModemManager scales from the radio's own measure (RSSI, RSRP).
    public static let thresholds: [(quality: LinkQuality, from: UInt8)] = [(.good, 56), (.moderate, 31)]

    /// The quality of a radio link whose signal is `percent` (0–100; more reads as 100).
    public init(signal percent: UInt8) {
        self = Self.thresholds.first { percent >= $0.from }?.quality ?? .minimal
    }
}

extension Engine {
    /// The link quality of a path whose preferred interface is `interface`
    /// (`nil`: no usable interface), with NetworkManager's `device` for it:
    /// the device's radio measurement for Wi-Fi and a modem (`DeviceFact.signal`,
    /// unknown when none is known, as without NetworkManager); `good` for wired
    /// Ethernet, which the path only prefers while it has carrier (a wire has
    /// no signal to lose: it carries its negotiated rate or nothing);
    /// `unknown` for a tunnel (it has no link layer of its own), Bluetooth and
    /// any other type.
    public static func linkQuality(of interface: PathInterface?, device: DeviceFact?) -> LinkQuality {
        guard let interface, interface.isUsable, !interface.isVPN else { return .unknown }
        switch interface.type {
        case .wifi, .wwan: return device?.signal.map(LinkQuality.init(signal:)) ?? .unknown
        case .ethernet: return .good
        case .bluetooth, .loopback, .other, .none: return .unknown
        }
    }
}
