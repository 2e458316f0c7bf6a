import Logging
import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop
import ReachabilityPlatform

/// Answers from `reachabilityd` on the system bus, driven by the signals it sends.
///
/// Each watched target is held once (`WatchHost`, `WatchAddress`, `WatchAddressPair`;
/// the internet as 0.0.0.0), for every subscriber in this process, and given back
/// (`Release`) when the last one leaves. The daemon sends a holder its target's signals
/// itself (unicast), so one handler, keyed by object path, takes them all, without a match
/// rule per target. `InterfacesAdded`, which the daemon sends a new holder before its
/// reply, carries the target's state then; each `PropertiesChanged` carries what changed
/// since (what differs from what this client was last told: a client that fell behind is
/// sent one once it reads again, the daemon being level-triggered). `GetAll` is asked only
/// when no `InterfacesAdded` came before the reply. A host just watched is being looked up
/// (`Status` -1): its first answer is its first state with a known `Status`, the one its
/// `StatusChanged` follows.
///
/// The service leaving and coming back: DaemonBackend+Owner.swift; the bus itself leaving
/// and coming back: DaemonBackend+Bus.swift; the path object:
/// DaemonBackend+Path.swift; one-shot calls: DaemonBackend+Queries.swift.
@LoopActor
final class DaemonBackend: FeedBackend {
    /// The connection to the system bus; a new one once the bus is back after it went away.
    var connection: BusConnection
    /// The library's log (the application's logger): the service leaving and coming back, what it answered.
    let logger: Logger
    var ownerWatch: SignalSubscription?
    var signals: SignalSubscription?
    /// The service's unique name (`""`: it is away), as the bus driver last told it.
    var owner = ""
    /// Whether the driver has answered `GetNameOwner` yet; who waits for it.
    var isOwnerKnown = false
    var ownerWaiters: [() -> Void] = []
    /// When the service last took its name (monotonic µs; 0: before this client started).
    var ownedSince: Int64 = 0
    /// The connection to the bus is gone: nothing can be started through it.
    var isDisconnected = false
    /// Attempts to connect to the bus again since it went away; the next one, while it waits.
    var reconnectAttempts = 0
    var reconnectTimer: SourceHandle?
    /// Attempts to start the service again since it was last up for `restartSettle`.
    var restartAttempts = 0
    /// Attempts since it last left: the wait before the next one doubles with each.
    var outageAttempts = 0
    /// The next attempt, while it waits for its turn.
    var restartTimer: SourceHandle?
    /// Whether the log already says the bus cannot start the service (said once per absence).
    var saidNotActivatable = false

    /// The watched targets, one per key: a connection holds a target once, however often it asks.
    var watches: [FeedKey: Watch] = [:]
    /// The same, by object path, once the daemon has named it: where its signals go.
    private var watchesByPath: [ObjectPath: Watch] = [:]
    /// Targets the daemon announced (`InterfacesAdded`) before its reply named them.
    private var announced: [ObjectPath: [String: DBusValue]] = [:]
    private var startsInFlight = 0
    /// Calls to the service waiting for their replies, and those waiting for their turn.
    var callsInFlight = 0
    var queuedCalls = Ring<() -> Void>()
    /// At most this many calls wait for their replies at once; the rest wait their turn, in
    /// order. A bus refuses a connection more (dbus-daemon: `max_replies_per_connection`, 128
    /// on the system bus), and a program that makes hundreds of references at once must not
    /// have some of them fail for it.
    static let callWindow = 64
    /// The path object, while a path monitor in this process runs.
    var pathWatch: PathWatch?
    static let root = ObjectPath(rawValue: ServiceNames.rootPath)!
    static let properties = "org.freedesktop.DBus.Properties"
    static let objectManager = "org.freedesktop.DBus.ObjectManager"

    /// One target watched through the daemon.
    @LoopActor
    final class Watch {
        let feed: Feed<FeedKey>
        /// Its object, once the daemon's reply has named it.
        var path: ObjectPath?
        var properties: [String: DBusValue] = [:]
        /// Which start this is: the answer to a start that a newer one replaced is ignored.
        var generation = 0
        var isStarting = false
        /// The start was sent while the service was away (the bus starts it for the call).
        var startedWhileAway = false

        init(feed: Feed<FeedKey>) { self.feed = feed }

        /// A real answer: any state of an address, the internet or a pair; for a host, one
        /// with a known `Status` (before, its first lookup is in flight).
        var isAnswer: Bool {
            guard case .input(let input) = feed.key, input.work != nil else { return true }
            guard case .int32(let status)? = properties[Contract.Target.status.name] else { return false }
            return status != ReachabilityStatus.unknown.rawValue
        }

        func publish() { feed.publish(ReachabilityState(properties: properties), isAnswer: isAnswer) }
    }

    init(logger: Logger) throws(ReachabilityError) {
        self.logger = logger
        connection = try Self.connect(logger: logger)
        follow(again: false)
    }

    /// Follows the service's name and takes its signals on `connection` (made at start, or again
    /// once the bus is back: `again`, when what the driver says of the name re-establishes every hold).
    func follow(again: Bool) {
        ownerWatch = connection.followOwner(of: ServiceNames.busName, current: { [unowned self] owner in
            self.ownerKnown(owner)
            if again { self.ownerChangedOnNewBus(owner) }
        }) { [unowned self] owner in
            self.ownerChanged(owner)
        }
        signals = connection.receiveUnicastSignals(from: ServiceNames.busName, wants: { interface, member in
            (interface == Self.properties && member == "PropertiesChanged")
                || (interface == Self.objectManager && member == "InterfacesAdded")
        }) { [unowned self] path, member, values in
            self.received(member, at: path, values)
        }
        connection.onDisconnected = { [unowned self] in self.disconnected() }
    }

    /// Calls the service, in the order asked, with at most `callWindow` waiting for replies.
    func call(_ path: ObjectPath, _ interface: String, _ member: String, _ arguments: [DBusValue] = [],
              reply: @escaping (Result<[DBusValue], BusError>) -> Void) {
        let send = { [unowned self] in
            self.callsInFlight += 1
            let used = self.connection
            used.callAsync(destination: ServiceNames.busName, path: path, interface: interface,
                           member: member, arguments) { [weak self] result in
                // A call on a connection since replaced (the bus went away) no longer counts.
                if let self, self.connection === used {
                    self.callsInFlight -= 1
                    if self.callsInFlight < Self.callWindow, let next = self.queuedCalls.popFirst() { next() }
                }
                reply(result)
            }
        }
        if callsInFlight < Self.callWindow && queuedCalls.isEmpty { send() } else { queuedCalls.append(send) }
    }

    // MARK: FeedBackend

    func open(_ feed: Feed<FeedKey>) {
        if let answer = Runtime.answer(feed.key) {  // never sent here
            feed.publish(answer, isAnswer: true)
            return feed.opened(nil)
        }
        let watch = Watch(feed: feed)
        watches[feed.key] = watch
        if isDisconnected {
            // Nothing is known until the bus is back; then it is watched with the others.
            feed.publish(.unknown, isAnswer: true)
            feed.opened(nil)
            return scheduleReconnect()
        }
        start(watch) { error in feed.opened(error) }
    }

    func close(_ feed: Feed<FeedKey>) {
        guard let watch = watches[feed.key], watch.feed === feed else { return }
        watches[feed.key] = nil
        if let path = watch.path, path != Self.root { release(path) }
        forget(watch)
        stopRestartsIfIdle()
    }

    // MARK: Watching

    /// Holds the target (`Watch…`) and takes its state from what the daemon announces.
    func start(_ watch: Watch, done: @escaping (ReachabilityError?) -> Void) {
        let key = watch.feed.key
        let (member, arguments) = Self.watchCall(key)
        watch.generation += 1
        let generation = watch.generation
        watch.isStarting = true
        watch.startedWhileAway = owner.isEmpty
        startsInFlight += 1
        call(Self.root, ServiceNames.managerInterface, member, arguments) { [weak self, logger] result in
            logger.debug("\(member) \(key.target): \(result)")
            guard let self else { return }
            self.startsInFlight -= 1
            defer { if self.startsInFlight == 0 { self.announced = [:] } }
            var path: ObjectPath?
            if case .success(let values) = result, case .objectPath(let named)? = values.first { path = named }
            guard self.watches[key] === watch, watch.generation == generation else {
                // Closed meanwhile: give the target back, unless this process watches it again
                // (then the newer watch holds it: the daemon counts one hold per connection).
                if let path, self.watches[key] == nil { self.release(path) }
                return
            }
            watch.isStarting = false
            switch result {
            case .success(let values):
                guard let path else { return done(.failed("unexpected reply to \(member): \(values.signature)")) }
                self.attach(watch, at: path)
                done(nil)
            case .failure(let error):
                done(ReachabilityError(error))
            }
        }
    }

    /// The daemon has named the target's object: its signals go to `watch` from now on.
    private func attach(_ watch: Watch, at path: ObjectPath) {
        watch.path = path
        watchesByPath[path] = watch
        if let properties = announced.removeValue(forKey: path) {
            watch.properties = properties
            return watch.publish()
        }
        // Not announced before the reply: this connection held it already, or the daemon holds
        // back what it sends here until it reads again. Its state is asked for.
        let generation = watch.generation
        readProperties(at: path, of: ServiceNames.targetInterface) { [weak self] result in
            guard let self, self.watchesByPath[path] === watch, watch.generation == generation else { return }
            switch result {
            case .success(let properties):
                watch.properties = properties
                watch.publish()
            case .failure(let error):
                self.logger.error("GetAll on \(path.rawValue): \(error)")
                // No first answer can come from it: its subscribers hear why (a later one tries again).
                if !watch.feed.hasFirstAnswer { watch.feed.fail(ReachabilityError(error)) }
            }
        }
    }

    /// Forgets the target's object (closed, or its daemon left or was replaced): a start
    /// still waiting for its answer is ignored when it comes.
    func forget(_ watch: Watch) {
        if let path = watch.path, watchesByPath[path] === watch { watchesByPath[path] = nil }
        watch.path = nil
        watch.properties = [:]
        watch.generation += 1
        watch.isStarting = false
    }

    /// A signal the service sent this connection: a held target's new state, or its first.
    private func received(_ member: String, at path: String, _ values: [DBusValue]) {
        guard values.count >= 2 else { return }
        if member == "PropertiesChanged" {
            guard values[0].stringValue == ServiceNames.targetInterface, case .dictionary(_, _, let entries) = values[1],
                let object = ObjectPath(rawValue: path)
            else { return }
            guard let watch = watchesByPath[object] else {
                // A change after its announcement, before the reply that names it.
                announced[object]?.merge(Self.dictionary(entries)) { $1 }
                return
            }
            watch.properties.merge(Self.dictionary(entries)) { $1 }
            return watch.publish()
        }
        // InterfacesAdded: an object this connection now holds, with all of its state.
        guard case .objectPath(let object) = values[0], case .dictionary(_, _, let interfaces) = values[1],
            let target = interfaces.first(where: { $0.key == .string(ServiceNames.targetInterface) }),
            case .dictionary(_, _, let entries) = target.value
        else { return }
        if let watch = watchesByPath[object] {
            watch.properties = Self.dictionary(entries)
            watch.publish()
        } else if startsInFlight > 0 {
            announced[object] = Self.dictionary(entries)
        }
    }

    /// Every property of `interface` at `path` (`GetAll`).
    func readProperties(at path: ObjectPath, of interface: String,
                        _ completion: @escaping (Result<[String: DBusValue], BusError>) -> Void) {
        call(path, Self.properties, "GetAll", [.string(interface)]) { result in
            completion(result.flatMap { values in
                guard case .dictionary(_, _, let entries)? = values.first else {
                    return .failure(.failed("unexpected reply to GetAll: \(values.signature)"))
                }
                return .success(Self.dictionary(entries))
            })
        }
    }

    /// Gives a target or the path object back (`Release`), without waiting for the answer.
    func release(_ path: ObjectPath) {
        call(Self.root, ServiceNames.managerInterface, Contract.Manager.release.name, [.objectPath(path)]) { _ in }
    }

    nonisolated static func dictionary(_ entries: [DBusValue.DictionaryEntry]) -> [String: DBusValue] {
        var result: [String: DBusValue] = [:]
        for entry in entries {
            guard let key = entry.key.stringValue else { continue }
            result[key] = if case .variant(let value) = entry.value { value } else { entry.value }
        }
        return result
    }
}
