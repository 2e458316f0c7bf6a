import CDBus
import ReachabilityLoop

extension BusConnection {
    /// Calls a method and waits for its reply (the loop does not run meanwhile).
    /// For command-line tools, benchmarks and start-up; never from a daemon's handler.
    /// `autoStart` false: the bus does not start the destination for this call (it answers
    /// `ServiceUnknown` when nobody owns the name). Wraps `dbus_connection_send_with_reply_and_block`
    /// and `dbus_message_set_auto_start`.
    public func call(
        destination: String, path: ObjectPath, interface: String, member: String, _ arguments: [DBusValue] = [],
        timeoutMilliseconds: Int32 = 25_000, autoStart: Bool = true
    ) throws(BusError) -> [DBusValue] {
        guard let message = dbus_message_new_method_call(destination, path.rawValue, interface, member) else {
            throw .failed("out of memory")
        }
        defer { dbus_message_unref(message) }
        if !autoStart { dbus_message_set_auto_start(message, 0) }
        guard MessageCodec.appendBody(arguments, to: message) else { throw .failed("out of memory") }
        var error = DBusError()
        dbus_error_init(&error)
        defer { dbus_error_free(&error) }
        guard let reply = dbus_connection_send_with_reply_and_block(raw, message, timeoutMilliseconds, &error) else {
            throw BusError(name: Self.errorName(error) ?? BusError.prefix + "Failed",
                           message: Self.errorMessage(error) ?? "no reply")
        }
        defer { dbus_message_unref(reply) }
        answerReceipts()
        guard let values = MessageCodec.decodeBody(reply) else { throw .failed("reply holds file descriptors") }
        return values
    }

    /// Dispatches what arrived while a blocking call waited: libdbus answers `Peer.Ping`
    /// (which a service asks as a read receipt) only when it dispatches, and a client that
    /// only makes blocking calls would otherwise never answer. Wraps `dbus_connection_dispatch`.
    package func answerReceipts() {
        while dbus_connection_get_dispatch_status(raw) == DBUS_DISPATCH_DATA_REMAINS {
            dbus_connection_dispatch(raw)
        }
    }

    private func answerPing(_ message: OpaquePointer) {
        defer { dbus_message_unref(message) }
        guard let reply = dbus_message_new_method_return(message) else { return }
        defer { dbus_message_unref(reply) }
        send(reply)
    }
}

extension BusConnection {
    /// Sends `count` calls built by `build`, keeping up to `window` in flight, and
    /// waits for every reply; returns the number of error replies. For throughput
    /// benchmarks. Wraps `dbus_connection_send`, `dbus_connection_read_write` and
    /// `dbus_connection_pop_message`.
    package func pipeline(
        count: Int, window: Int,
        _ build: () -> (destination: String, path: ObjectPath, interface: String, member: String, [DBusValue])
    ) -> Int {
        var outstanding = Set<UInt32>()
        var sent = 0
        var errors = 0
        while sent < count || !outstanding.isEmpty {
            while sent < count && outstanding.count < window {
                let (destination, path, interface, member, arguments) = build()
                guard let message = dbus_message_new_method_call(destination, path.rawValue, interface, member)
                else { return errors + count - sent }
                MessageCodec.appendBody(arguments, to: message)
                var serial: UInt32 = 0
                dbus_connection_send(raw, message, &serial)
                dbus_message_unref(message)
                outstanding.insert(serial)
                sent += 1
            }
            _ = dbus_connection_read_write(raw, -1)
            while let message = dbus_connection_pop_message(raw) {
                if dbus_message_is_method_call(message, "org.freedesktop.DBus.Peer", "Ping") != 0 {
                    answerPing(message)  // a read receipt (it unrefs the message)
                    continue
                }
                let type = dbus_message_get_type(message)
                if type == DBUS_MESSAGE_TYPE_METHOD_RETURN || type == DBUS_MESSAGE_TYPE_ERROR {
                    if outstanding.remove(dbus_message_get_reply_serial(message)) != nil,
                        type == DBUS_MESSAGE_TYPE_ERROR
                    {
                        errors += 1
                    }
                }
                dbus_message_unref(message)
            }
        }
        return errors
    }
}

// MARK: Asynchronous client calls and signal subscriptions (the client library)

extension BusConnection {
    /// Calls a method; `reply` runs on the loop with the values or the error.
    /// Wraps `dbus_connection_send_with_reply` and `dbus_pending_call_set_notify`.
    public func callAsync(
        destination: String, path: ObjectPath, interface: String, member: String, _ arguments: [DBusValue] = [],
        timeoutMilliseconds: Int32 = 25_000, reply: @escaping (Result<[DBusValue], BusError>) -> Void
    ) {
        guard let message = dbus_message_new_method_call(destination, path.rawValue, interface, member),
            MessageCodec.appendBody(arguments, to: message)
        else { return reply(.failure(.failed("out of memory"))) }
        defer { dbus_message_unref(message) }
        var pending: OpaquePointer?
        guard dbus_connection_send_with_reply(raw, message, &pending, timeoutMilliseconds) != 0, let pending else {
            return reply(.failure(.failed("the connection to the bus is closed")))
        }
        dbus_pending_call_set_notify(pending, ReplyBox.notify, Unmanaged.passRetained(ReplyBox(reply)).toOpaque(),
                                     ReplyBox.release)
        dbus_pending_call_unref(pending)
    }

    /// A reply message as values or as the error it carries.
    static func result(of message: OpaquePointer) -> Result<[DBusValue], BusError> {
        let values = MessageCodec.decodeBody(message)
        guard dbus_message_get_type(message) == DBUS_MESSAGE_TYPE_ERROR else {
            return values.map { .success($0) } ?? .failure(.failed("reply holds file descriptors"))
        }
        let name = dbus_message_get_error_name(message).map { String(cString: $0) } ?? BusError.prefix + "Failed"
        return .failure(BusError(name: name, message: values?.first?.stringValue ?? ""))
    }

    /// Calls `handler` with the arguments of every signal `member` of `interface`
    /// emitted by `sender` at `path`, until the subscription is cancelled. A signal
    /// counts only if the bus stamped it with `sender` itself — or, for a
    /// well-known name, with its current unique owner as `followOwner(of:)` learnt
    /// it from the bus driver: match rules filter broadcasts only, and any peer
    /// can send us a signal directly.
    /// Wraps `dbus_bus_add_match` and `dbus_bus_remove_match` (without waiting for their replies).
    public func subscribe(
        sender: String, path: ObjectPath, interface: String, member: String, argument0: String? = nil,
        _ handler: @escaping ([DBusValue]) -> Void
    ) -> SignalSubscription {
        var rule = "type='signal',sender='\(sender)',path='\(path.rawValue)',interface='\(interface)',member='\(member)'"
        if let argument0 { rule += ",arg0='\(argument0)'" }
        dbus_bus_add_match(raw, rule, nil)
        let isUnique = sender.hasPrefix(":") || sender == Self.busDriver
        let number = addSignalHandler { [unowned self] message in
            guard dbus_message_is_signal(message, interface, member) != 0,
                dbus_message_get_path(message).map({ String(cString: $0) }) == path.rawValue,
                let from = Self.sender(of: message), from == (isUnique ? sender : self.knownOwners[sender]),
                let values = MessageCodec.decodeBody(message)
            else { return }
            if let argument0, values.first?.stringValue != argument0 { return }
            handler(values)
        }
        return SignalSubscription(connection: self, rule: rule, number: number)
    }

    /// Calls `handler` for every signal that `name`'s current owner sends to this connection
    /// itself (a unicast signal, its destination this connection), until the subscription is
    /// cancelled: the path it was emitted at, its member, and its arguments. No match rule:
    /// the bus delivers a message to its destination whatever the destination's rules (they
    /// select broadcasts only), so a service that sends each client its own signals needs
    /// none per object, and one handler serves all of them. `wants(interface, member)`
    /// chooses, before anything is decoded, the signals `handler` gets. The owner is the one
    /// `followOwner(of:)` learnt from the bus driver; a signal from anybody else is dropped.
    public func receiveUnicastSignals(
        from name: String, wants: @escaping (_ interface: String, _ member: String) -> Bool,
        _ handler: @escaping (_ path: String, _ member: String, _ values: [DBusValue]) -> Void
    ) -> SignalSubscription {
        let number = addSignalHandler { [unowned self] message in
            guard let destination = dbus_message_get_destination(message), let owner = self.knownOwners[name],
                Self.sender(of: message) == owner, String(cString: destination) == self.uniqueName,
                let interface = dbus_message_get_interface(message).map({ String(cString: $0) }),
                let member = dbus_message_get_member(message).map({ String(cString: $0) }),
                wants(interface, member), let path = dbus_message_get_path(message).map({ String(cString: $0) }),
                let values = MessageCodec.decodeBody(message)
            else { return }
            handler(path, member, values)
        }
        return SignalSubscription(connection: self, rule: nil, number: number)
    }

    /// Calls `handler(newOwner)` whenever `name` changes owner (`""`: it has none now),
    /// as the bus driver announces it, and keeps the owner for `subscribe(sender:…)`.
    /// The current owner is asked for once (`GetNameOwner`); the bus sends its reply
    /// in order with the announcements, so the last word is always the right one.
    /// `current` gets that reply's owner (`""`: none, or no answer), once, before any
    /// change announced after it.
    public func followOwner(of name: String, current: ((String) -> Void)? = nil,
                            _ handler: @escaping (String) -> Void) -> SignalSubscription {
        let subscription = subscribe(
            sender: Self.busDriver, path: ObjectPath("/org/freedesktop/DBus"), interface: "org.freedesktop.DBus",
            member: "NameOwnerChanged", argument0: name
        ) { [unowned self] values in
            guard values.signature == "sss", let owner = values[2].stringValue else { return }
            self.knownOwners[name] = owner.isEmpty ? nil : owner
            handler(owner)
        }
        callAsync(destination: Self.busDriver, path: ObjectPath("/org/freedesktop/DBus"),
                  interface: "org.freedesktop.DBus", member: "GetNameOwner", [.string(name)]) { [weak self] result in
            var owner = ""
            if case .success(let values) = result, let unique = values.first?.stringValue {
                self?.knownOwners[name] = unique
                owner = unique
            }
            current?(owner)
        }
        return subscription
    }
}

/// A reply callback kept alive by libdbus until the call ends.
private final class ReplyBox {
    let reply: (Result<[DBusValue], BusError>) -> Void
    init(_ reply: @escaping (Result<[DBusValue], BusError>) -> Void) { self.reply = reply }

    /// The call ended (a reply, an error, or its timeout): the reply callback runs on the
    /// loop, entered through `LoopActor.assumeIsolated` (written here, in a nonisolated place,
    /// so that the compiler allows nothing else). Wraps `dbus_pending_call_steal_reply`.
    static let notify: DBusPendingCallNotifyFunction = { pending, data in
        let box = Unmanaged<ReplyBox>.fromOpaque(data!).takeUnretainedValue()
        LoopActor.assumeIsolated((box, dbus_pending_call_steal_reply(pending))) { box, message in
            guard let message else { return box.reply(.failure(.failed("no reply"))) }
            defer { dbus_message_unref(message) }
            box.reply(BusConnection.result(of: message))
        }
    }

    /// libdbus is done with the box (after `notify`, or with the call unanswered at close).
    static let release: DBusFreeFunction = { data in Unmanaged<ReplyBox>.fromOpaque(data!).release() }
}

/// A signal match; cancelled (its rule, if it has one, removed) when dropped.
@LoopActor
public final class SignalSubscription {
    private weak var connection: BusConnection?
    private let rule: String?
    private let number: Int

    init(connection: BusConnection, rule: String?, number: Int) {
        self.connection = connection
        self.rule = rule
        self.number = number
    }

    public func cancel() {
        guard let connection, connection.signalHandlers.removeValue(forKey: number) != nil, let rule else { return }
        dbus_bus_remove_match(connection.raw, rule, nil)
    }

    isolated deinit { cancel() }
}
