import CNetworkManager
import Logging
import ReachabilityLoop

/// The modems' signal quality, read from ModemManager on the system bus through
/// GIO's D-Bus connection: libnm does not carry it. Every ModemManager call of
/// the project is in this file. `NetworkManagerBackend` keeps one while
/// NetworkManager has a modem device (whose UDI is its ModemManager object),
/// and none otherwise.
///
/// It follows ModemManager coming and going (`g_bus_watch_name_on_connection`),
/// reads every modem's `SignalQuality` when it comes and when its object manager
/// adds or removes a modem (`GetManagedObjects`: ModemManager exports modems a
/// while after it starts), and follows each modem's `PropertiesChanged`. It
/// never polls. Each of those reaches `onChange`.
///
/// GIO's own object-manager client is not used: it subscribes to signals from a
/// worker thread during its asynchronous creation, so their callbacks go to
/// GLib's global default context, which nothing runs here (the loop has a
/// context of its own); every subscription below is made on the loop thread.
@LoopActor
final class ModemManagerSignals {
    nonisolated static let busName = "org.freedesktop.ModemManager1"
    nonisolated static let managerPath = "/org/freedesktop/ModemManager1"
    nonisolated static let modemInterface = "org.freedesktop.ModemManager1.Modem"
    /// The modem interface's signal quality (ub): percent, and whether it is recent.
    nonisolated static let signalQuality = "SignalQuality"

    /// The system bus (`GDBusConnection`), once connected.
    private var connection: OpaquePointer?
    private var subscriptions: [guint] = []
    private var nameWatch: guint = 0
    private let cancellable: UnsafeMutablePointer<GCancellable>
    private let onChange: () -> Void
    private let logger: Logger
    private let failureLevel: Logger.Level
    /// What GLib's callbacks hold: a weak way back, so a callback after we are gone does nothing.
    private let handle: Handle
    /// Each modem's signal quality, by object path.
    private var modems: [String: Quality] = [:]

    /// `SignalQuality` as ModemManager gives it.
    private struct Quality: Equatable {
        var percent: UInt32
        var recent: Bool
    }
    /// Counts `GetManagedObjects` calls: only the reply to the last one is used.
    private var reads = 0

    private final class Handle {
        weak var owner: ModemManagerSignals?
    }

    /// Connects to the system bus (`g_bus_get`, asynchronously) and starts following
    /// ModemManager there, without starting it when it does not run.
    /// A call that fails is logged at `failureLevel` (see `NetworkObserver.init`).
    init(logger: Logger, failureLevel: Logger.Level, onChange: @escaping () -> Void) {
        self.onChange = onChange
        self.logger = logger
        self.failureLevel = failureLevel
        cancellable = g_cancellable_new()
        handle = Handle()
        handle.owner = self
        g_bus_get(G_BUS_TYPE_SYSTEM, cancellable, Self.busMade, Unmanaged.passRetained(handle).toOpaque())
    }

    isolated deinit {
        g_cancellable_cancel(cancellable)
        g_object_unref(cancellable)
        if nameWatch != 0 { g_bus_unwatch_name(nameWatch) }
        if let connection {
            for subscription in subscriptions { g_dbus_connection_signal_unsubscribe(connection, subscription) }
            g_object_unref(UnsafeMutableRawPointer(connection))
        }
    }

    /// A retained `handle` for a GLib registration that releases it (`GDestroyNotify`).
    private var retainedHandle: gpointer { Unmanaged.passRetained(handle).toOpaque() }
    private static let releaseHandle: @convention(c) (gpointer?) -> Void = { data in
        Unmanaged<Handle>.fromOpaque(data!).release()
    }

    // MARK: GIO's callbacks
    //
    // GIO calls back on the loop's context, where each subscription was made. Each callback
    // is written in a nonisolated place, so the compiler lets it reach its owner only through
    // `LoopActor.assumeIsolated`, which checks that it runs on the loop.

    /// `body` on the loop with the handle's owner, unless it is gone.
    private nonisolated static func enter<Argument>(
        _ handle: Handle, _ argument: Argument, _ body: @LoopActor (ModemManagerSignals, Argument) -> Void
    ) {
        LoopActor.assumeIsolated((handle, argument)) { handle, argument in
            if let owner = handle.owner { body(owner, argument) }
        }
    }

    private nonisolated static func enter<Argument>(
        _ data: gpointer?, _ argument: Argument, _ body: @LoopActor (ModemManagerSignals, Argument) -> Void
    ) {
        enter(Unmanaged<Handle>.fromOpaque(data!).takeUnretainedValue(), argument, body)
    }

    /// `g_bus_get` ended (its handle was retained for it). Wraps `g_bus_get_finish`.
    private nonisolated static let busMade: GAsyncReadyCallback = { _, result, data in
        let handle = Unmanaged<Handle>.fromOpaque(data!).takeRetainedValue()
        var error: UnsafeMutablePointer<GError>?
        guard let connection = g_bus_get_finish(result, &error) else {
            return logUnlessCancelled(error, from: handle, "cannot follow ModemManager's signal quality")
        }
        LoopActor.assumeIsolated((handle, connection)) { handle, connection in
            guard let owner = handle.owner else { return g_object_unref(UnsafeMutableRawPointer(connection)) }
            owner.attach(connection)
        }
    }

    /// A modem's `PropertiesChanged`.
    private nonisolated static let modemPropertiesChanged: GDBusSignalCallback = {
        _, _, path, _, _, parameters, data in
        enter(data, (String(cString: path!), parameters!)) { owner, signal in
            owner.propertiesChanged(of: signal.0, signal.1)
        }
    }

    /// The object manager added or removed a modem.
    private nonisolated static let modemsChanged: GDBusSignalCallback = { _, _, _, _, _, _, data in
        enter(data, ()) { owner, _ in owner.readModems() }
    }

    private nonisolated static let appeared: GBusNameAppearedCallback = { _, _, _, data in
        enter(data, ()) { owner, _ in owner.readModems() }
    }

    private nonisolated static let vanished: GBusNameVanishedCallback = { _, _, data in
        enter(data, ()) { owner, _ in owner.vanished() }
    }

    private func attach(_ connection: OpaquePointer) {
        self.connection = connection
        // A modem's properties changed (arg0: the interface).
        subscriptions.append(g_dbus_connection_signal_subscribe(
            connection, Self.busName, "org.freedesktop.DBus.Properties", "PropertiesChanged", nil,
            Self.modemInterface, G_DBUS_SIGNAL_FLAGS_NONE, Self.modemPropertiesChanged, retainedHandle,
            Self.releaseHandle))
        // A modem was exported or went away: read them all again.
        subscriptions.append(g_dbus_connection_signal_subscribe(
            connection, Self.busName, "org.freedesktop.DBus.ObjectManager", nil, Self.managerPath, nil,
            G_DBUS_SIGNAL_FLAGS_NONE, Self.modemsChanged, retainedHandle, Self.releaseHandle))
        // ModemManager came (read everything) or went (nothing is known).
        nameWatch = g_bus_watch_name_on_connection(
            connection, Self.busName, G_BUS_NAME_WATCHER_FLAGS_NONE, Self.appeared, Self.vanished,
            retainedHandle, Self.releaseHandle)
    }

    private func vanished() {
        reads += 1
        guard !modems.isEmpty else { return }
        modems = [:]
        onChange()
    }

    /// Every modem's signal quality, from ModemManager's object manager (asynchronously).
    private func readModems() {
        guard let connection else { return }
        reads += 1
        let call = Unmanaged.passRetained(ReadCall(handle: handle, number: reads)).toOpaque()
        g_dbus_connection_call(
            connection, Self.busName, Self.managerPath, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects",
            nil, nil, G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, cancellable, Self.modemsRead, call)
    }

    /// `GetManagedObjects` answered (its `ReadCall` was retained for it). Wraps
    /// `g_dbus_connection_call_finish`.
    private nonisolated static let modemsRead: GAsyncReadyCallback = { source, result, data in
        let call = Unmanaged<ReadCall>.fromOpaque(data!).takeRetainedValue()
        var error: UnsafeMutablePointer<GError>?
        guard let reply = g_dbus_connection_call_finish(OpaquePointer(source), result, &error) else {
            return logUnlessCancelled(error, from: call.handle, "cannot read ModemManager's modems")
        }
        defer { g_variant_unref(reply) }
        enter(call.handle, (call.number, reply)) { owner, answer in
            if owner.reads == answer.0 { owner.managedObjects(answer.1) }
        }
    }

    private final class ReadCall {
        let handle: Handle
        let number: Int
        init(handle: Handle, number: Int) {
            self.handle = handle
            self.number = number
        }
    }

    /// `GetManagedObjects`' reply, `(a{oa{sa{sv}}})`: every modem's signal quality.
    private func managedObjects(_ reply: OpaquePointer) {
        var found: [String: Quality] = [:]
        let objects = Variant.child(reply, 0)
        defer { g_variant_unref(objects) }
        for index in 0..<g_variant_n_children(objects) {
            let entry = Variant.child(objects, index)
            defer { g_variant_unref(entry) }
            let path = Variant.child(entry, 0)
            let interfaces = Variant.child(entry, 1)
            defer {
                g_variant_unref(path)
                g_variant_unref(interfaces)
            }
            guard let properties = g_variant_lookup_value(interfaces, Self.modemInterface, nil) else { continue }
            defer { g_variant_unref(properties) }
            if let quality = Self.signalQuality(in: properties) {
                found[String(cString: g_variant_get_string(path, nil))] = quality
            }
        }
        guard found != modems else { return }
        modems = found
        onChange()
    }

    /// `PropertiesChanged(s interface, a{sv} changed, as invalidated)` of the modem at `path`.
    private func propertiesChanged(of path: String, _ parameters: OpaquePointer) {
        let changed = Variant.child(parameters, 1)
        defer { g_variant_unref(changed) }
        guard let quality = Self.signalQuality(in: changed) else { return }
        guard modems[path] != quality else { return }
        modems[path] = quality
        onChange()
    }

    /// `SignalQuality` (ub) in an `a{sv}` of the modem interface's properties.
    private nonisolated static func signalQuality(in properties: OpaquePointer) -> Quality? {
        guard let value = g_variant_lookup_value(properties, signalQuality, nil) else { return nil }
        defer { g_variant_unref(value) }
        guard String(cString: g_variant_get_type_string(value)) == "(ub)" else { return nil }
        let percent = Variant.child(value, 0)
        let recent = Variant.child(value, 1)
        defer {
            g_variant_unref(percent)
            g_variant_unref(recent)
        }
        return Quality(percent: g_variant_get_uint32(percent), recent: g_variant_get_boolean(recent) != 0)
    }

    /// Logs `error` (and frees it) unless the call was cancelled (its owner is gone).
    private nonisolated static func logUnlessCancelled(
        _ error: UnsafeMutablePointer<GError>?, from handle: Handle, _ what: String
    ) {
        guard let error else { return }
        let (message, cancelled) = GLibError.take(error)
        if cancelled { return }
        enter(handle, message) { owner, message in owner.logger.log(level: owner.failureLevel, "\(what) (\(message))") }
    }

    /// The signal quality in percent of ModemManager's modem at `path` while
    /// ModemManager says it is recent; `nil` while it is not, or not known (no
    /// ModemManager, no such modem, not read yet).
    func signal(ofModem path: String) -> UInt8? {
        guard let quality = modems[path], quality.recent else { return nil }
        return UInt8(min(quality.percent, 100))
    }
}

/// GVariant access the reply parsing needs.
private enum Variant {
    /// `g_variant_get_child_value`, which never fails on an index below `g_variant_n_children`.
    static func child(_ value: OpaquePointer, _ index: gsize) -> OpaquePointer {
        g_variant_get_child_value(value, index)!
    }
}
