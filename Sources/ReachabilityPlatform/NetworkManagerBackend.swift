import CNetworkManager
import Logging
import ReachabilityCore
import ReachabilityLoop

/// What NetworkManager says, read through libnm. Every libnm call of the
/// project is in this file (a modem's signal quality, which libnm does not
/// carry, comes from ModemManager: `ModemManagerSignals`). Created
/// asynchronously; follows NetworkManager appearing and vanishing
/// (`nm-running`), and reports any change of the client, its devices or its
/// active connections through `onChange`, and a change of a device's radio
/// signal only when its `LinkQuality` changes.
@LoopActor
public final class NetworkManagerBackend {
    private var client: OpaquePointer?
    private var clientHandlers: [gulong] = []
    /// Objects we listen to (devices, active connections, Wi-Fi devices' active access
    /// points), each held with a reference.
    private var watched: [UnsafeMutableRawPointer: [gulong]] = [:]
    /// ModemManager's signal quality of the modems, followed while a modem device exists.
    private var modemManager: ModemManagerSignals?
    /// The link quality each device's signal gave at the last report: a signal that
    /// changes within one quality is no change (access points change often).
    private var reportedQualities: [String: LinkQuality] = [:]
    private let cancellable: UnsafeMutablePointer<GCancellable>
    private let onChange: () -> Void
    private let logger: Logger
    /// The level of "cannot reach NetworkManager" and of ModemManager's failed calls.
    private let failureLevel: Logger.Level
    /// Why libnm could not be used at all (no system bus), once known.
    public private(set) var failure: String?
    /// Whether the client's creation has ended, made or failed: until then nothing
    /// NetworkManager says is known, not even whether it runs.
    public var hasFirstAnswer: Bool { client != nil || failure != nil }

    /// Starts creating the libnm client (`nm_client_new_async`); `onChange` is
    /// called once it is ready and after every change. A source that cannot be read is
    /// logged at `failureLevel` (see `NetworkObserver.init`).
    public init(logger: Logger, failureLevel: Logger.Level, onChange: @escaping () -> Void) {
        self.onChange = onChange
        self.logger = logger
        self.failureLevel = failureLevel
        cancellable = g_cancellable_new()
        nm_client_new_async(cancellable, Self.clientMade, Unmanaged.passUnretained(self).toOpaque())
    }

    isolated deinit {
        g_cancellable_cancel(cancellable)
        g_object_unref(cancellable)
        for (object, handlers) in watched { release(object, handlers) }
        if let client {
            for handler in clientHandlers { g_signal_handler_disconnect(client.raw, handler) }
            g_object_unref(client.raw)
        }
    }

    // MARK: libnm's callbacks
    //
    // libnm calls back on the thread-default context it was created on (the loop's). Each
    // callback is written in a nonisolated place, so the compiler lets it touch the backend
    // only through `LoopActor.assumeIsolated`, which checks that it runs on the loop.

    /// `body` on the loop, with the backend whose address libnm hands back as user data.
    private nonisolated static func enter<Argument>(
        _ data: gpointer?, _ argument: Argument, _ body: @LoopActor (NetworkManagerBackend, Argument) -> Void
    ) {
        LoopActor.assumeIsolated((Unmanaged<NetworkManagerBackend>.fromOpaque(data!).takeUnretainedValue(), argument)) {
            body($0.0, $0.1)
        }
    }

    /// `nm_client_new_async` ended. It may end after we are gone if creation is cancelled:
    /// it then sees the cancellation error and touches nothing. Wraps `nm_client_new_finish`.
    private nonisolated static let clientMade: GAsyncReadyCallback = { _, result, data in
        var error: UnsafeMutablePointer<GError>?
        let client = nm_client_new_finish(result, &error)
        if let error {
            let (message, cancelled) = GLibError.take(error)
            if cancelled { return }
            enter(data, message) { backend, message in
                backend.failure = message
                backend.logger.log(level: backend.failureLevel, "cannot reach NetworkManager on the system bus (\(message))")
                backend.onChange()
            }
            return
        }
        enter(data, client!) { backend, client in backend.attach(client) }
    }

    /// The swapped callback every libnm signal goes to.
    private nonisolated static let changed: @convention(c) (gpointer?) -> Void = { data in
        enter(data, ()) { backend, _ in backend.somethingChanged() }
    }

    /// The swapped callback of an access point's `notify::strength`.
    private nonisolated static let strengthChanged: @convention(c) (gpointer?) -> Void = { data in
        enter(data, ()) { backend, _ in backend.signalChanged() }
    }

    private func connect(
        _ object: gpointer, _ signal: String, _ callback: @convention(c) (gpointer?) -> Void = changed
    ) -> gulong {
        reach_signal_connect_swapped(object, signal, callback, Unmanaged.passUnretained(self).toOpaque())
    }

    private func attach(_ client: OpaquePointer) {
        self.client = client
        // "notify" is every property of the client, "dns-configuration" among them: a change of
        // the DNS configuration alone (a server or a search domain) is a change, and names are
        // looked up again.
        for signal in ["notify", "device-added", "device-removed", "active-connection-added",
                       "active-connection-removed"] {
            clientHandlers.append(connect(client.raw, signal))
        }
        logger.info("NetworkManager client ready (running: \(isRunning))")
        somethingChanged()
    }

    private func somethingChanged() {
        resyncWatchedObjects()
        reportedQualities = signalQualities()
        onChange()
    }

    /// An access point's strength or a modem's signal quality changed: a change
    /// only when some device's link quality did.
    private func signalChanged() {
        let qualities = signalQualities()
        guard qualities != reportedQualities else { return }
        reportedQualities = qualities
        onChange()
    }

    /// The link quality of every device with a known signal, by interface.
    private func signalQualities() -> [String: LinkQuality] {
        guard let client else { return [:] }
        var qualities: [String: LinkQuality] = [:]
        for pointer in Self.objects(nm_client_get_devices(client)) {
            let device = OpaquePointer(pointer)
            if let signal = signal(of: device), let name = Self.name(of: device) {
                qualities[name] = LinkQuality(signal: signal)
            }
        }
        return qualities
    }

    /// The radio signal of a device in percent: a Wi-Fi device's active access point's
    /// strength (`nm_access_point_get_strength`), or a modem's signal quality from
    /// ModemManager while recent; `nil` for other devices and when none is known.
    private func signal(of device: OpaquePointer) -> UInt8? {
        switch nm_device_get_device_type(device) {
        case NM_DEVICE_TYPE_WIFI:
            return Self.activeAccessPoint(of: device).map(nm_access_point_get_strength)
        case NM_DEVICE_TYPE_MODEM:
            return nm_device_get_udi(device).flatMap { modemManager?.signal(ofModem: String(cString: $0)) }
        default:
            return nil
        }
    }

    /// The SSID of a Wi-Fi device's active access point (`nm_access_point_get_ssid`, raw
    /// bytes: an SSID need not be text); `nil` for other devices, without an active access
    /// point (between two while roaming, while disconnected) and for a hidden one not known yet.
    private nonisolated static func ssid(of device: OpaquePointer) -> [UInt8]? {
        guard let accessPoint = activeAccessPoint(of: device), let bytes = nm_access_point_get_ssid(accessPoint)
        else { return nil }
        var size: gsize = 0
        guard let data = g_bytes_get_data(bytes, &size), size > 0 else { return nil }
        return Array(UnsafeRawBufferPointer(start: data, count: Int(size)))
    }

    /// A Wi-Fi device's active access point (`nm_device_wifi_get_active_access_point`);
    /// `nil` for other devices and while it has none.
    private nonisolated static func activeAccessPoint(of device: OpaquePointer) -> OpaquePointer? {
        guard nm_device_get_device_type(device) == NM_DEVICE_TYPE_WIFI else { return nil }
        return nm_device_wifi_get_active_access_point(device)
    }

    private nonisolated static func name(of device: OpaquePointer) -> String? {
        (nm_device_get_ip_iface(device) ?? nm_device_get_iface(device)).map { String(cString: $0) }
    }

    /// Listens to every current device and active connection, to the strength and SSID of
    /// each Wi-Fi device's active access point, and to ModemManager while a modem
    /// device exists; stops listening to those that are gone.
    private func resyncWatchedObjects() {
        guard let client else { return }
        let devices = Self.objects(nm_client_get_devices(client))
        var current: [UnsafeMutableRawPointer] = devices
        current += Self.objects(nm_client_get_active_connections(client))
        let accessPoints = devices.compactMap { pointer -> UnsafeMutableRawPointer? in
            Self.activeAccessPoint(of: OpaquePointer(pointer)).map { UnsafeMutableRawPointer($0) }
        }
        let currentSet = Set(current + accessPoints)
        for (object, handlers) in watched where !currentSet.contains(object) {
            release(object, handlers)
            watched[object] = nil
        }
        for object in current where watched[object] == nil {
            g_object_ref(object)
            watched[object] = [connect(object, "notify")]
        }
        for object in accessPoints where watched[object] == nil {
            g_object_ref(object)
            // Its SSID too: a hidden network's is learnt after it became the active one.
            watched[object] = [connect(object, "notify::strength", Self.strengthChanged),
                               connect(object, "notify::ssid")]
        }

        if !devices.contains(where: { nm_device_get_device_type(OpaquePointer($0)) == NM_DEVICE_TYPE_MODEM }) {
            modemManager = nil
        } else if modemManager == nil {
            modemManager = ModemManagerSignals(logger: logger, failureLevel: failureLevel) { [unowned self] in self.signalChanged() }
        }
    }

    private func release(_ object: UnsafeMutableRawPointer, _ handlers: [gulong]) {
        for handler in handlers { g_signal_handler_disconnect(object, handler) }
        g_object_unref(object)
    }

    private nonisolated static func objects(_ array: UnsafePointer<GPtrArray>?) -> [UnsafeMutableRawPointer] {
        guard let array, let data = array.pointee.pdata else { return [] }
        return (0..<Int(array.pointee.len)).compactMap { data[$0] }
    }

    /// NetworkManager is on the bus and libnm has read its state.
    public var isRunning: Bool {
        guard let client else { return false }
        return nm_client_get_nm_running(client) != 0
    }

    /// The global connectivity and the devices, or `nil` while NetworkManager is not running.
    public func facts() -> (connectivity: Connectivity, devices: [String: DeviceFact])? {
        guard let client, isRunning else { return nil }
        var devices: [String: DeviceFact] = [:]
        for pointer in Self.objects(nm_client_get_devices(client)) {
            let device = OpaquePointer(pointer)
            guard let name = Self.name(of: device) else { continue }
            let type = nm_device_get_device_type(device)
            let state = nm_device_get_state(device)
            let metered = nm_device_get_metered(device)
            var isVPN = Self.tunnelTypes.contains(type.rawValue)
            if let active = nm_device_get_active_connection(device),
                let connectionType = nm_active_connection_get_connection_type(active).map({ String(cString: $0) })
            {
                isVPN = isVPN || connectionType == "vpn" || connectionType == "wireguard"
                    || nm_active_connection_get_vpn(active) != 0
            }
            devices[name] = DeviceFact(
                interface: name,
                type: Self.interfaceType(type.rawValue),
                activity: Self.activity(state.rawValue),
                isVPN: isVPN,
                isMetered: metered == NM_METERED_YES || metered == NM_METERED_GUESS_YES,
                isMeteredByUser: metered == NM_METERED_YES,
                connectivityIPv4: Self.connectivity(nm_device_get_connectivity(device, Int32(AF_INET))),
                connectivityIPv6: Self.connectivity(nm_device_get_connectivity(device, Int32(AF_INET6))),
                signal: signal(of: device),
                ssid: Self.ssid(of: device))
        }
        return (Self.connectivity(nm_client_get_connectivity(client)), devices)
    }

    /// NetworkManager's DNS configuration (`nm_client_get_dns_configuration`) has
    /// an entry with a name server; `nil` while NetworkManager is not running.
    public var dnsConfigured: Bool? {
        guard let client, isRunning else { return nil }
        return Self.objects(nm_client_get_dns_configuration(client)).contains { entry in
            guard let servers = nm_dns_entry_get_nameservers(OpaquePointer(entry)) else { return false }
            return servers[0] != nil
        }
    }

    /// NetworkManager's DNS configuration's name servers and domains, one entry a line, in
    /// a comparable form; `nil` while NetworkManager is not running.
    public var dnsServers: String? {
        guard let client, isRunning else { return nil }
        func strings(_ list: UnsafePointer<UnsafePointer<CChar>?>?) -> [String] {
            guard let list else { return [] }
            var out: [String] = []
            var index = 0
            while let item = list[index] {
                out.append(String(cString: item))
                index += 1
            }
            return out
        }
        return Self.objects(nm_client_get_dns_configuration(client)).map { entry in
            let entry = OpaquePointer(entry)
            return (strings(nm_dns_entry_get_nameservers(entry)) + ["/"] + strings(nm_dns_entry_get_domains(entry)))
                .joined(separator: " ")
        }.joined(separator: "\n")
    }

    // MARK: Mapping NetworkManager's enums

    /// WireGuard, tun/tap, PPP and IP tunnels: transient connections.
    private nonisolated static let tunnelTypes: Set<UInt32> = [
        NM_DEVICE_TYPE_WIREGUARD.rawValue, NM_DEVICE_TYPE_TUN.rawValue, NM_DEVICE_TYPE_PPP.rawValue,
        NM_DEVICE_TYPE_IP_TUNNEL.rawValue,
    ]

    nonisolated static func interfaceType(_ type: UInt32) -> InterfaceType {
        switch type {
        case NM_DEVICE_TYPE_WIFI.rawValue, NM_DEVICE_TYPE_OLPC_MESH.rawValue, NM_DEVICE_TYPE_WIFI_P2P.rawValue:
            .wifi
        case NM_DEVICE_TYPE_ETHERNET.rawValue, NM_DEVICE_TYPE_VETH.rawValue, NM_DEVICE_TYPE_BOND.rawValue,
            NM_DEVICE_TYPE_BRIDGE.rawValue, NM_DEVICE_TYPE_VLAN.rawValue, NM_DEVICE_TYPE_TEAM.rawValue,
            NM_DEVICE_TYPE_MACVLAN.rawValue:
            .ethernet
        case NM_DEVICE_TYPE_MODEM.rawValue: .wwan
        case NM_DEVICE_TYPE_BT.rawValue: .bluetooth
        case NM_DEVICE_TYPE_LOOPBACK.rawValue: .loopback
        default: .other
        }
    }

    nonisolated static func activity(_ state: UInt32) -> DeviceFact.Activity {
        switch state {
        case NM_DEVICE_STATE_NEED_AUTH.rawValue: .needsAuthentication
        case NM_DEVICE_STATE_PREPARE.rawValue, NM_DEVICE_STATE_CONFIG.rawValue, NM_DEVICE_STATE_IP_CONFIG.rawValue,
            NM_DEVICE_STATE_IP_CHECK.rawValue, NM_DEVICE_STATE_SECONDARIES.rawValue:
            .activating
        case NM_DEVICE_STATE_ACTIVATED.rawValue: .activated
        default: .idle
        }
    }

    /// Whether NetworkManager checks connectivity here: it has a check configured and enabled.
    /// Wraps `nm_client_connectivity_check_get_available` and `…_get_enabled`.
    public var checksConnectivity: Bool {
        guard let client, isRunning else { return false }
        return nm_client_connectivity_check_get_available(client) != 0
            && nm_client_connectivity_check_get_enabled(client) != 0
    }

    /// Asks NetworkManager to check its connectivity now (`CheckConnectivity`) rather than at
    /// its interval; its verdict comes back as a change of its connectivity, as any other. A
    /// failed call is logged. Wraps `nm_client_check_connectivity_async`.
    public func checkConnectivity() {
        guard let client else { return }
        nm_client_check_connectivity_async(client, cancellable, Self.connectivityChecked,
                                           Unmanaged.passUnretained(self).toOpaque())
    }

    /// `nm_client_check_connectivity_async` ended (cancelled: the backend is gone, touch
    /// nothing). Wraps `nm_client_check_connectivity_finish`.
    private nonisolated static let connectivityChecked: GAsyncReadyCallback = { source, result, data in
        var error: UnsafeMutablePointer<GError>?
        let state = nm_client_check_connectivity_finish(OpaquePointer(source), result, &error)
        let failure = error.map { GLibError.take($0) }
        if failure?.cancelled == true { return }
        enter(data, (state, failure?.message)) { backend, answer in
            if let message = answer.1 {
                backend.logger.log(level: backend.failureLevel, "NetworkManager's connectivity check failed: \(message)")
            } else {
                backend.logger.debug("NetworkManager checked its connectivity: \(NetworkManagerBackend.connectivity(answer.0).rawValue)")
            }
        }
    }

    nonisolated static func connectivity(_ state: NMConnectivityState) -> Connectivity {
        switch state {
        case NM_CONNECTIVITY_NONE: .none
        case NM_CONNECTIVITY_PORTAL: .portal
        case NM_CONNECTIVITY_LIMITED: .limited
        case NM_CONNECTIVITY_FULL: .full
        default: .unknown
        }
    }
}

extension OpaquePointer {
    /// A GObject pointer for GLib functions that take `gpointer`.
    fileprivate var raw: gpointer { UnsafeMutableRawPointer(self) }
}
