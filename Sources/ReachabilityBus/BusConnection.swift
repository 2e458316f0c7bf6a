import CDBus
import CGLib
import Logging
import ReachabilityCore
import ReachabilityFairness
import ReachabilityLoop

/// A private libdbus connection driven by the GLib main loop, exporting
/// objects declared as `Interface` tables. No other module calls libdbus.
@LoopActor
public final class BusConnection {
    public enum Address: Sendable, Equatable {
        case system, session
        case custom(String)
    }

    let raw: OpaquePointer
    /// The unique name the bus gave us (":1.7").
    public let uniqueName: String

    /// Where the connection and its objects log.
    let logger: Logger
    /// The objects this connection exports.
    let tree: ObjectTree
    var dispatchIdle: SourceHandle?
    /// Set while queued calls wait for the outgoing queue to drain (`BusConnection+Flow`).
    var outputWatch: SourceHandle?
    /// Marshalled reply bodies, reused while the values are the same.
    let replies = ReplyCache()
    /// Signal handlers by subscription number, called in subscription order.
    var signalHandlers: [Int: (OpaquePointer) -> Void] = [:]
    var nextSubscription = 0
    /// The bounds of the connection's flow and fairness (docs/hardening.md, "Flow and fairness limits").
    let limits: Limits
    /// Who calls the exported objects, what waits, and what each has not read: the scheduler
    /// that decides (`CallScheduler`), and the loop's sources it asked for.
    let callers: Callers
    var departuresTracked = false
    /// Called for every name that loses its owner, after the connection has closed the
    /// accounts of a unique name that left.
    var departureHandlers: [(String, String, String) -> Void] = []

    /// The well-known names this connection asked for and holds.
    private(set) var ownedNames: Set<String> = []
    /// The unique owners of the well-known names followed with `followOwner(of:)`,
    /// as the bus driver last told us: a service's signals count only from its owner.
    var knownOwners: [String: String] = [:]

    /// Called when the bus takes one of our names away (another instance ran with `--replace`).
    public var onNameLost: ((String) -> Void)?
    /// Called when the connection to the bus is lost.
    public var onDisconnected: (() -> Void)?

    /// Connects and registers with the bus; logs to `logger`; bounds its flow by `limits`.
    /// Wraps `dbus_bus_get_private`, `dbus_connection_open_private` and `dbus_bus_register`.
    public init(_ address: Address, logger: Logger, limits: Limits = .standard) throws(BusError) {
        self.logger = logger
        self.limits = limits
        callers = Callers(limits: limits)
        tree = ObjectTree(machineID: BusConnection.machineID, logger: logger)
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        var connection: OpaquePointer?
        switch address {
        case .system: connection = dbus_bus_get_private(DBUS_BUS_SYSTEM, &error)
        case .session: connection = dbus_bus_get_private(DBUS_BUS_SESSION, &error)
        case .custom(let a):
            connection = dbus_connection_open_private(a, &error)
            if let c = connection, dbus_bus_register(c, &error) == 0 {
                dbus_connection_close(c)
                dbus_connection_unref(c)
                connection = nil
            }
        }
        guard let connection else {
            throw BusError(name: Self.errorName(error) ?? BusError.prefix + "Failed",
                           message: "cannot connect to the \(address) bus: \(Self.errorMessage(error) ?? "unknown error")")
        }
        raw = connection
        uniqueName = dbus_bus_get_unique_name(connection).map { String(cString: $0) } ?? ""
        dbus_connection_set_exit_on_disconnect(connection, 0)
        boundIntake()
        tree.emit = { [unowned self] path, interface, name, values, destinations in
            self.emitSignal(path: path, interface: interface, name: name, values, to: destinations)
        }
        tree.isBehind = { [unowned self] peer in self.callers.scheduler.isBehind(peer) }
        tree.userOf = { [unowned self] peer in self.callers.scheduler.user(of: peer) }
        attachToMainLoop()
        registerDispatcher()
    }

    isolated deinit {
        dbus_connection_set_watch_functions(raw, nil, nil, nil, nil, nil)
        dbus_connection_set_timeout_functions(raw, nil, nil, nil, nil, nil)
        dbus_connection_set_dispatch_status_function(raw, nil, nil, nil)
        dbus_connection_close(raw)
        dbus_connection_unref(raw)
    }

    /// This machine's id (`/etc/machine-id`). Wraps `dbus_try_get_local_machine_id`.
    nonisolated static func machineID() -> String {
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        guard let id = dbus_try_get_local_machine_id(&error) else { return "" }
        defer { dbus_free(id) }
        return String(cString: id)
    }

    /// The sender of a message (a unique name, or `org.freedesktop.DBus` for the
    /// bus driver), as the bus daemon stamped it: peers cannot choose it.
    nonisolated static func sender(of message: OpaquePointer) -> String? {
        dbus_message_get_sender(message).map { String(cString: $0) }
    }

    nonisolated static let busDriver = "org.freedesktop.DBus"

    nonisolated static func errorName(_ e: DBusError) -> String? { e.name.map { String(cString: $0) } }
    nonisolated static func errorMessage(_ e: DBusError) -> String? { e.message.map { String(cString: $0) } }

    // MARK: Names

    /// Becomes the primary owner of `name`, or throws a message naming the current owner.
    /// With `replace`, takes the name over from an owner that allows it. Our own
    /// ownership always allows replacement. Wraps `dbus_bus_request_name`.
    public func requestName(_ name: String, replace: Bool) throws(BusError) {
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        // Callers are followed before anyone can call us by this name, and its answers leave
        // through a short line (`BusConnection+Flow`).
        trackDepartures()
        limitSendBuffer()
        learnWhoPaysForUnread()
        var flags = UInt32(DBUS_NAME_FLAG_DO_NOT_QUEUE) | UInt32(DBUS_NAME_FLAG_ALLOW_REPLACEMENT)
        if replace { flags |= UInt32(DBUS_NAME_FLAG_REPLACE_EXISTING) }
        let result = dbus_bus_request_name(raw, name, flags, &error)
        if result == -1 {
            throw BusError(name: Self.errorName(error) ?? BusError.prefix + "Failed",
                           message: "cannot own \(name): \(Self.errorMessage(error) ?? "request failed")")
        }
        guard result == DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER || result == DBUS_REQUEST_NAME_REPLY_ALREADY_OWNER
        else {
            let owner = nameOwner(name).map { " (owned by \($0))" } ?? ""
            let hint = replace ? "the owner does not allow replacement" : "run with --replace to take it over"
            throw BusError(name: BusError.prefix + "AddressInUse",
                           message: "the name \(name) is already taken\(owner); \(hint)")
        }
        ownedNames.insert(name)
    }

    /// The unique name owning `name`, if any (a blocking call, for start-up messages only).
    func nameOwner(_ name: String) -> String? {
        guard let call = dbus_message_new_method_call(
            "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner")
        else { return nil }
        defer { dbus_message_unref(call) }
        MessageCodec.appendBody([.string(name)], to: call)
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        guard let reply = dbus_connection_send_with_reply_and_block(raw, call, 2000, &error) else { return nil }
        defer { dbus_message_unref(reply) }
        return MessageCodec.decodeBody(reply)?.first?.stringValue
    }

    /// Calls `handler(name, oldOwner, "")` for every name that loses its owner on the
    /// bus (`NameOwnerChanged` with an empty new owner, from the bus driver only).
    public func watchNameOwners(_ handler: @escaping (String, String, String) -> Void) {
        trackDepartures()
        departureHandlers.append(handler)
    }

    /// Registers a handler for every signal that reaches us; returns its number.
    @discardableResult
    func addSignalHandler(_ handler: @escaping (OpaquePointer) -> Void) -> Int {
        nextSubscription += 1
        signalHandlers[nextSubscription] = handler
        return nextSubscription
    }

    // MARK: Sending

    func send(_ message: OpaquePointer) {
        if dbus_connection_send(raw, message, nil) == 0 {
            logger.error("out of memory sending a D-Bus message")
        }
    }

    /// Emits a signal: a broadcast when `destinations` is `nil`, else one unicast
    /// signal to each of them. Wraps `dbus_message_new_signal` and `dbus_message_copy`.
    func emitSignal(path: ObjectPath, interface: String, name: String, _ values: [DBusValue],
                    to destinations: [String]? = nil) {
        guard destinations?.isEmpty != true,
            let message = dbus_message_new_signal(path.rawValue, interface, name)
        else { return }
        defer { dbus_message_unref(message) }
        guard MessageCodec.appendBody(values, to: message) else { return }
        guard let destinations else { return send(message) }
        let size = values.messageSize
        for destination in destinations {
            guard let copy = dbus_message_copy(message) else { continue }
            defer { dbus_message_unref(copy) }
            if dbus_message_set_destination(copy, destination) != 0 { send(copy, to: destination, size: size) }
        }
    }

    /// Writes out everything queued (used before exiting). Wraps `dbus_connection_flush`.
    public func flush() { dbus_connection_flush(raw) }

    // MARK: Main loop integration

    /// libdbus tells us which fds and timeouts to watch; GLib watches them.
    private func attachToMainLoop() {
        dbus_connection_set_watch_functions(raw, LoopGlue.addWatch, LoopGlue.removeWatch, LoopGlue.toggleWatch,
                                            Unmanaged.passUnretained(self).toOpaque(), nil)
        dbus_connection_set_timeout_functions(raw, LoopGlue.addTimeout, LoopGlue.removeTimeout,
                                              LoopGlue.toggleTimeout, nil, nil)
        dbus_connection_set_dispatch_status_function(raw, Self.dispatchStatusChanged,
                                                     Unmanaged.passUnretained(self).toOpaque(), nil)
        scheduleDispatch()
    }

    func scheduleDispatch() {
        guard dispatchIdle == nil else { return }
        dispatchIdle = Sources.idle { [unowned self] in
            self.dispatchIdle = nil
            self.dispatchTurn()
        }
    }

    // MARK: Dispatch

    private func registerDispatcher() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        var vtable = DBusObjectPathVTable()
        vtable.message_function = Self.messageFunction
        dbus_connection_register_fallback(raw, "/", &vtable, me)
        dbus_connection_add_filter(raw, Self.filterFunction, me, nil)
    }

    // MARK: libdbus's callbacks
    //
    // Each is written in a nonisolated place (a closure written inside the actor's code would be
    // taken as isolated without a word), so the compiler lets it touch the connection only
    // through `LoopActor.assumeIsolated`, which stops the process if libdbus ever calls it
    // from a thread other than the loop's.

    /// `body` on the loop, with the connection whose address libdbus hands back as user data
    /// and the message (an argument, not a capture: nothing is sent to the actor).
    private nonisolated static func enter<T>(
        _ data: UnsafeMutableRawPointer?, _ message: OpaquePointer?,
        _ body: @LoopActor (BusConnection, OpaquePointer?) -> T
    ) -> T {
        LoopActor.assumeIsolated((Unmanaged<BusConnection>.fromOpaque(data!).takeUnretainedValue(), message)) {
            body($0.0, $0.1)
        }
    }

    private nonisolated static let dispatchStatusChanged: DBusDispatchStatusFunction = { _, status, data in
        enter(data, nil) { connection, _ in
            if status == DBUS_DISPATCH_DATA_REMAINS { connection.scheduleDispatch() }
        }
    }

    private nonisolated static let messageFunction: DBusObjectPathMessageFunction = { _, message, data in
        enter(data, message) { $0.handle($1!) }
    }

    private nonisolated static let filterFunction: DBusHandleMessageFunction = { _, message, data in
        enter(data, message) { $0.filter($1!) }
        return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
    }

    private func filter(_ message: OpaquePointer) {
        guard dbus_message_get_type(message) == DBUS_MESSAGE_TYPE_SIGNAL else { return }
        let sender = Self.sender(of: message)
        // libdbus makes this one itself, with no sender (the bus refuses the Local interface from peers).
        if dbus_message_is_signal(message, "org.freedesktop.DBus.Local", "Disconnected") != 0 {
            if sender == nil { onDisconnected?() }
            return
        }
        // Only from the bus driver, and only about a name we hold: anyone can send us a NameLost.
        if dbus_message_is_signal(message, "org.freedesktop.DBus", "NameLost") != 0 {
            if sender == Self.busDriver, let name = MessageCodec.decodeBody(message)?.first?.stringValue,
                ownedNames.remove(name) != nil
            {
                onNameLost?(name)
            }
            return
        }
        for key in signalHandlers.keys.sorted() { signalHandlers[key]?(message) }
    }

    private func handle(_ message: OpaquePointer) -> DBusHandlerResult {
        guard dbus_message_get_type(message) == DBUS_MESSAGE_TYPE_METHOD_CALL else {
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        }
        let sender = Self.sender(of: message) ?? ""
        // A caller that does not read what it is sent costs no more than this test: its
        // call is dropped before it is decoded (an answer would only wait for it unread).
        // Nor does one whose user's share of the queue is used up: refused at once, undecoded.
        if shouldDropUnread(from: sender) || refuseIfFull(message, from: sender) {
            return DBUS_HANDLER_RESULT_HANDLED
        }
        let pathString = dbus_message_get_path(message).map { String(cString: $0) } ?? "/"
        guard let path = ObjectPath(rawValue: pathString) else {
            return DBUS_HANDLER_RESULT_NOT_YET_HANDLED
        }
        let interface = dbus_message_get_interface(message).map { String(cString: $0) } ?? ""
        let member = dbus_message_get_member(message).map { String(cString: $0) } ?? ""
        let signature = dbus_message_get_signature(message).map { String(cString: $0) } ?? ""
        // Refused before it is decoded or queued (`BusConnection+Intake`): its descriptors close
        // when libdbus releases the message, at the end of this dispatch.
        let refusal = intakeRefusal(message)
        let decoded = refusal == nil ? MessageCodec.decodeBody(message) : []
        let call = MethodCall(
            responder: MessageResponder(message: message, connection: self), sender: sender,
            path: path, interface: interface, member: member, arguments: decoded ?? [], signature: signature,
            wantsReply: dbus_message_get_no_reply(message) == 0, logger: logger)
        if let refusal {
            refuse(call, with: refusal)
        } else if decoded == nil {
            refuse(call, with: .invalidArgs("file descriptors are not accepted"))
        } else {
            admit(call)
        }
        return DBUS_HANDLER_RESULT_HANDLED
    }
}
