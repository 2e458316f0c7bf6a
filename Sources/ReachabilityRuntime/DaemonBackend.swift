import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop
import ReachabilityPlatform

/// Answers from `reachabilityd` on the system bus: one `WatchHost`/`WatchAddress`
/// per watched target (shared by this process's subscribers), its properties
/// followed through `PropertiesChanged`, `Release` when the last one leaves.
/// A daemon that leaves the bus makes every target unknown; while anything is
/// held, the bus is asked to start it again when it can (bounded attempts, with
/// backoff); when it (or a new instance) comes back, every target is watched
/// again and updates resume.
@LoopActor
final class DaemonBackend: FeedBackend {
    private let connection: BusConnection
    private var ownerWatch: SignalSubscription?
    /// The service's unique name as the bus last announced it (`""`: it is away, or no
    /// change was announced since this client started).
    private var owner = ""
    /// When the service last took its name (monotonic µs; 0: before this client started).
    private var ownedSince: Int64 = 0
    /// The connection to the bus is gone: nothing can be started through it.
    private var isDisconnected = false
    /// Attempts to start the service again since it was last up for `restartSettle`.
    private var restartAttempts = 0
    /// Attempts since it last left: the wait before the next one doubles with each.
    private var outageAttempts = 0
    /// The next attempt, while it waits for its turn.
    private var restartTimer: SourceHandle?

    /// At most this many attempts to start the service again (since it was last up for
    /// `restartSettle`): after each departure the first comes after 0.5 s, and each next one
    /// of the same absence after twice the wait of the one before it (1 s, 2 s, 4 s, 8 s,
    /// 16 s: about 30 s in all for a service that never comes back). Not at once: a
    /// `systemctl stop` is still finishing when the name goes, and systemd cancels that stop
    /// job ("Job … canceled") when a start of the unit is asked before it is done. Then the
    /// client waits for the name to come back (`NameOwnerChanged`), as it does from the
    /// start when the bus cannot start the service.
    static let restartAttemptsMax = 6
    static let restartFirstWait: UInt32 = 500
    /// A service that kept its name this long before it left was up: the attempts start from
    /// the first again. One that leaves sooner (it fails soon after its start) continues the
    /// backoff, so a service that keeps failing is never started in a loop.
    static let restartSettle: Int64 = 10_000_000
    private var watches: [ObjectIdentifier: Watch] = [:]
    /// The path object, while a path monitor in this process runs.
    private var pathWatch: PathWatch?
    private static let root = ObjectPath(rawValue: ServiceNames.rootPath)!
    private static let properties = "org.freedesktop.DBus.Properties"

    /// One of the daemon's objects followed: its path, its properties, the subscription.
    @LoopActor
    private class ObjectWatch {
        var path: ObjectPath?
        var signal: SignalSubscription?
        var properties: [String: DBusValue] = [:]
        var isSettled = false

        /// Hands the properties on to the watch's feed.
        func publish() {}

        /// Forgets the object (its daemon left, or a new one came): nothing is followed any more.
        func forget() {
            signal?.cancel()
            signal = nil
            path = nil
            properties = [:]
        }
    }

    /// One target watched through the daemon.
    private final class Watch: ObjectWatch {
        let feed: Feed
        init(feed: Feed) { self.feed = feed }

        override func publish() {
            feed.publish(ReachabilityState(properties: properties), settled: isSettled)
        }
    }

    /// The daemon's path object (`WatchPath`), followed like a target.
    private final class PathWatch: ObjectWatch {
        let feed: PathFeed
        init(feed: PathFeed) { self.feed = feed }

        override func publish() { feed.publish(PathState(properties: properties), settled: isSettled) }
    }

    init() throws(ReachabilityError) {
        do {
            connection = try BusConnection(.system)
        } catch {
            throw .serviceUnavailable(error.message)
        }
        ownerWatch = connection.followOwner(of: ServiceNames.busName) { [unowned self] owner in
            self.ownerChanged(owner)
        }
        connection.onDisconnected = { [unowned self] in
            // The system bus itself went away: nothing can be known through it any more.
            Log.error("disconnected from the system bus")
            self.isDisconnected = true
            self.ownerChanged("")
        }
    }

    /// Calls the bus driver; `reply` gets the reply's first value (`nil`: an error).
    private func driver(_ member: String, _ arguments: [DBusValue] = [], timeoutMilliseconds: Int32 = 2000,
                        reply: @escaping (Result<DBusValue?, BusError>) -> Void) {
        connection.callAsync(destination: "org.freedesktop.DBus", path: ObjectPath("/org/freedesktop/DBus"),
                             interface: "org.freedesktop.DBus", member: member, arguments,
                             timeoutMilliseconds: timeoutMilliseconds) { reply($0.map(\.first)) }
    }

    /// Whether the bus can start the service (`ListActivatableNames`), without waiting.
    private func isActivatable(_ done: @escaping (Bool) -> Void) {
        driver("ListActivatableNames") { names in
            guard case .success(.array(_, let names)?) = names else { return done(false) }
            done(names.contains(.string(ServiceNames.busName)))
        }
    }

    /// Whether the daemon runs, or the bus can start it: asks the bus driver, without waiting.
    func isServiceAvailable(_ done: @escaping (Bool) -> Void) {
        driver("NameHasOwner", [.string(ServiceNames.busName)]) { [unowned self] owned in
            if case .success(.boolean(true)?) = owned { return done(true) }
            self.isActivatable(done)
        }
    }

    private func call(_ path: ObjectPath, _ interface: String, _ member: String, _ arguments: [DBusValue] = [],
                      reply: @escaping (Result<[DBusValue], BusError>) -> Void) {
        connection.callAsync(destination: ServiceNames.busName, path: path, interface: interface, member: member,
                             arguments, reply: reply)
    }

    // MARK: FeedBackend

    func open(_ feed: Feed) {
        let watch = Watch(feed: feed)
        watches[ObjectIdentifier(feed)] = watch
        start(watch) { error in feed.opened(error) }
    }

    func close(_ feed: Feed) {
        guard let watch = watches.removeValue(forKey: ObjectIdentifier(feed)) else { return }
        watch.signal?.cancel()
        if let path = watch.path, path != Self.root {
            release(path)
        }
    }

    func query(_ key: FeedKey, _ completion: @escaping (Result<ReachabilityState, ReachabilityError>) -> Void) {
        if let answer = Runtime.answer(key) { return completion(.success(answer)) }  // never sent here
        if case .input(let input) = key, case .pair = input { return queryPair(input, completion) }
        let text = if case .input(let input) = key { input.name } else { "" }
        call(Self.root, ServiceNames.managerInterface, Contract.Manager.query.name, [.string(text)]) { result in
            completion(result.mapError(ReachabilityError.init).flatMap { values in
                guard values.count == 3, case .uint32(let flags) = values[0], case .int32(let status) = values[1],
                    case .dictionary(_, _, let details) = values[2]
                else { return .failure(.failed("unexpected reply to Query: \(values.signature)")) }
                return .success(ReachabilityState(flags: flags, status: status, details: details))
            })
        }
    }

    /// An address pair once: `Query` takes one string, so the pair is watched, read and released.
    private func queryPair(_ pair: TargetInput,
                           _ completion: @escaping (Result<ReachabilityState, ReachabilityError>) -> Void) {
        let (member, arguments) = Self.watchCall(pair)
        call(Self.root, ServiceNames.managerInterface, member, arguments) {
            [weak self] result in
            guard let self else { return }
            switch result {
            case .success(let values):
                guard case .objectPath(let path)? = values.first else {
                    return completion(.failure(.failed("unexpected reply to WatchAddressPair: \(values.signature)")))
                }
                self.readProperties(at: path, of: ServiceNames.targetInterface) { result in
                    self.release(path)
                    completion(result.mapError(ReachabilityError.init).map(ReachabilityState.init(properties:)))
                }
            case .failure(let error):
                completion(.failure(ReachabilityError(error)))
            }
        }
    }

    /// Every target object below the root (the daemon's `GetManagedObjects`).
    func watchedTargets(_ completion: @escaping (Result<[ReachabilitySnapshot], ReachabilityError>) -> Void) {
        call(Self.root, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects") { result in
            completion(result.mapError(ReachabilityError.init).map { values in
                guard case .dictionary(_, _, let objects)? = values.first else { return [] }
                return objects.compactMap { object -> ReachabilitySnapshot? in
                    guard case .dictionary(_, _, let interfaces) = object.value,
                        let target = interfaces.first(where: { $0.key == .string(ServiceNames.targetInterface) }),
                        case .dictionary(_, _, let entries) = target.value
                    else { return nil }
                    let properties = Self.dictionary(entries)
                    let name = properties[Contract.Target.name.name]?.stringValue ?? ""
                    let kind = properties[Contract.Target.kind.name]?.stringValue
                    let watched: ReachabilityTarget = Self.target(kind: kind, name: name)
                    return ReachabilitySnapshot(target: watched, state: ReachabilityState(properties: properties))
                }.sorted { $0.target.description < $1.target.description }
            })
        }
    }

    /// The Manager method that watches `input`, and its arguments.
    static func watchCall(_ input: TargetInput) -> (member: String, arguments: [DBusValue]) {
        switch input {
        case .host: (Contract.Manager.watchHost.name, [.string(input.name)])
        case .address: (Contract.Manager.watchAddress.name, [.string(input.name)])
        case .pair(let local, let remote):
            (Contract.Manager.watchAddressPair.name,
             [.string(local?.description ?? ""), .string(remote?.description ?? "")])
        }
    }

    /// A listed target from its `Kind` and `Name` (a pair's name is its two literals joined by a comma).
    /// The address the internet is watched as (Apple's internet target is 0.0.0.0).
    static let internetAddress = "0.0.0.0"

    static func target(kind: String?, name: String) -> ReachabilityTarget {
        switch kind {
        case TargetKind.internet.rawValue: return .internet
        case TargetKind.address.rawValue: return .address(name)
        case TargetKind.pair.rawValue:
            let sides = name.split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            return .addressPair(local: sides.first ?? "", remote: sides.count > 1 ? sides[1] : "")
        default: return .host(name)
        }
    }

    // MARK: Watching

    /// Watches the target (the internet needs no call), follows its properties and reads them all.
    private func start(_ watch: Watch, done: @escaping (ReachabilityError?) -> Void) {
        if let answer = Runtime.answer(watch.feed.key) {  // never sent here
            watch.feed.publish(answer, settled: true)
            return done(nil)
        }
        // The internet is watched as Apple's internet address, 0.0.0.0: a held target whose
        // properties and signals carry this caller's own answer (the root object's internet
        // target is the system's: with uid rules, it may not be this user's).
        let (member, arguments) = if case .input(let input) = watch.feed.key {
            Self.watchCall(input)
        } else {
            (Contract.Manager.watchAddress.name, [DBusValue.string(Self.internetAddress)])
        }
        let name = if case .input(let input) = watch.feed.key { input.name } else { Self.internetAddress }
        call(Self.root, ServiceNames.managerInterface, member, arguments) { [weak self] result in
            Log.debug("\(member) \(name): \(result)")
            guard let self else { return }
            switch result {
            case .success(let values):
                guard case .objectPath(let path)? = values.first else {
                    return done(.failed("unexpected reply to \(member): \(values.signature)"))
                }
                guard self.watches[ObjectIdentifier(watch.feed)] === watch else {
                    // Closed meanwhile: give the target back.
                    return self.release(path)
                }
                self.attach(watch, at: path)
                done(nil)
            case .failure(let error):
                done(ReachabilityError(error))
            }
        }
    }

    /// Starts following `watch`'s object at `path`: each `PropertiesChanged` merged in and published.
    private func follow(_ watch: ObjectWatch, at path: ObjectPath, of interface: String) {
        watch.path = path
        watch.isSettled = false
        watch.signal = followProperties(at: path, of: interface) { changed in
            watch.properties.merge(changed) { $1 }
            watch.publish()
        }
    }

    private func attach(_ watch: Watch, at path: ObjectPath) {
        follow(watch, at: path, of: ServiceNames.targetInterface)
        readProperties(at: path, of: ServiceNames.targetInterface) { [weak self] result in
            guard let self else { return }
            guard case .success(let properties) = result else {
                return Log.error("GetAll on \(path.rawValue): \(result)")
            }
            watch.properties = properties
            let state = ReachabilityState(properties: watch.properties)
            if state.flags == nil, case .input(.host) = watch.feed.key {
                // A host just watched is being looked up: its first answer is the one after `Refresh`.
                self.call(path, ServiceNames.targetInterface, Contract.Target.refresh.name) { _ in
                    watch.isSettled = true
                    watch.publish()
                }
                return watch.publish()
            }
            watch.isSettled = true
            watch.publish()
        }
    }

    /// Follows `interface`'s properties at `path`: `changed` gets what each `PropertiesChanged`
    /// carries (only from the service's current owner: `subscribe` checks the sender).
    private func followProperties(at path: ObjectPath, of interface: String,
                                  _ changed: @escaping ([String: DBusValue]) -> Void) -> SignalSubscription {
        connection.subscribe(sender: ServiceNames.busName, path: path, interface: Self.properties,
                             member: "PropertiesChanged") { values in
            guard values.count >= 2, values[0].stringValue == interface,
                case .dictionary(_, _, let entries) = values[1]
            else { return }
            changed(Self.dictionary(entries))
        }
    }

    /// Every property of `interface` at `path` (`GetAll`).
    private func readProperties(at path: ObjectPath, of interface: String,
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
    private func release(_ path: ObjectPath) {
        call(Self.root, ServiceNames.managerInterface, Contract.Manager.release.name, [.objectPath(path)]) { _ in }
    }

    // MARK: The path object

    func openPath(_ feed: PathFeed) {
        let watch = PathWatch(feed: feed)
        pathWatch = watch
        startPath(watch)
    }

    func closePath(_ feed: PathFeed) {
        guard let watch = pathWatch, watch.feed === feed else { return }
        pathWatch = nil
        watch.signal?.cancel()
        if let path = watch.path {
            release(path)
        }
    }

    /// Holds the path object (`WatchPath`), follows its properties and reads them all.
    /// A daemon without `WatchPath` (older than the library) gives no interfaces: the path
    /// is unsatisfied, as with no network, and the error is logged.
    private func startPath(_ watch: PathWatch) {
        call(Self.root, ServiceNames.managerInterface, Contract.Manager.watchPath.name) { [weak self] result in
            Log.debug("WatchPath: \(result)")
            guard let self else { return }
            switch result {
            case .success(let values):
                guard case .objectPath(let path)? = values.first else {
                    Log.error("unexpected reply to WatchPath: \(values.signature)")
                    return watch.feed.publish(.none, settled: true)
                }
                guard self.pathWatch === watch else {
                    // Closed meanwhile: give it back.
                    return self.release(path)
                }
                self.attachPath(watch, at: path)
            case .failure(let error):
                Log.error("WatchPath: \(error)")
                watch.feed.publish(.none, settled: true)
            }
        }
    }

    private func attachPath(_ watch: PathWatch, at path: ObjectPath) {
        follow(watch, at: path, of: ServiceNames.pathInterface)
        readProperties(at: path, of: ServiceNames.pathInterface) { [weak self] result in
            guard let self, self.pathWatch === watch else { return }
            guard case .success(let properties) = result else {
                Log.error("GetAll on \(path.rawValue): \(result)")
                return watch.feed.publish(.none, settled: true)
            }
            watch.properties = properties
            watch.isSettled = true
            watch.publish()
        }
    }

    private func ownerChanged(_ owner: String) {
        let now = MonotonicClock.microseconds()
        if owner.isEmpty {
            Log.info("\(ServiceNames.busName) left the system bus; targets are unknown until it is back")
            if now - ownedSince >= Self.restartSettle { restartAttempts = 0 }
            outageAttempts = 0
        } else {
            Log.debug("\(ServiceNames.busName) is on the system bus as \(owner)")
            ownedSince = now
            restartTimer = nil
        }
        self.owner = owner
        if let watch = pathWatch {
            watch.forget()
            if owner.isEmpty {
                // The daemon left: no path until it is back.
                watch.isSettled = true
                watch.feed.publish(.none, settled: true)
            } else {
                startPath(watch)
            }
        }
        for watch in watches.values {
            watch.forget()
            if owner.isEmpty {
                // The daemon left: nothing is known until it is back.
                watch.isSettled = true
                watch.feed.publish(.unknown, settled: true)
            } else {
                start(watch) { error in if let error { watch.feed.fail(error) } }
            }
        }
        if owner.isEmpty { scheduleRestart() }
    }

    /// The next attempt to start the service again, after its wait.
    private func scheduleRestart() {
        guard restartTimer == nil, restartAttempts < Self.restartAttemptsMax else { return }
        let wait = Self.restartFirstWait << UInt32(outageAttempts)
        restartTimer = Sources.after(milliseconds: wait) { [weak self] in self?.startServiceAgain() }
    }

    /// The service left while something is held: asks the bus to start it again, when the bus
    /// can (it is activatable), up to `restartAttemptsMax` times with backoff. Its return
    /// (`NameOwnerChanged`) re-establishes every hold (`ownerChanged`). When the bus cannot
    /// start it, or the attempts are spent, nothing more is asked: its return is awaited.
    private func startServiceAgain() {
        restartTimer = nil
        guard owner.isEmpty, !isDisconnected, !(watches.isEmpty && pathWatch == nil),
            restartAttempts < Self.restartAttemptsMax
        else { return }
        let name = ServiceNames.busName
        isActivatable { [weak self] activatable in
            guard let self, self.owner.isEmpty, !self.isDisconnected else { return }
            guard activatable else {
                return Log.info("the system bus cannot start \(name); waiting for it to come back")
            }
            self.restartAttempts += 1
            self.outageAttempts += 1
            let attempt = self.restartAttempts
            Log.info("starting \(name) again (attempt \(attempt) of \(Self.restartAttemptsMax))")
            // The bus's own activation timeout (25 s by default) ends a start that hangs.
            self.driver("StartServiceByName", [.string(name), .uint32(0)], timeoutMilliseconds: 60_000) {
                [weak self] result in
                guard let self, self.owner.isEmpty else { return }  // back: every hold is re-established
                if case .failure(let error) = result {
                    Log.warning("could not start \(name) (attempt \(attempt)): \(error.message)")
                }
                guard attempt < Self.restartAttemptsMax else {
                    return Log.warning("\(name) could not be started again (\(attempt) attempts); "
                                       + "waiting for it to come back")
                }
                self.scheduleRestart()
            }
        }
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

extension ReachabilityState {
    /// A target's state from its `…Target` properties (`Status` -1: unknown).
    init(properties p: [String: DBusValue]) {
        self.init(flags: p[Contract.Target.flags.name], status: p[Contract.Target.status.name]) { p[$0.property.name] }
    }

    /// A target's state from `Query`'s reply.
    init(flags: UInt32, status: Int32, details: [DBusValue.DictionaryEntry]) {
        let d = DaemonBackend.dictionary(details)
        self.init(flags: .uint32(flags), status: .int32(status)) { d[$0.rawValue] }
    }

    /// The fields, each found by its `QueryDetail` (or the property of the same fact).
    private init(flags: DBusValue?, status: DBusValue?, _ field: (QueryDetail) -> DBusValue?) {
        func string(_ f: QueryDetail) -> String { field(f)?.stringValue ?? "" }
        func bool(_ f: QueryDetail) -> Bool { if case .boolean(true)? = field(f) { true } else { false } }
        var addresses: [String] = []
        if case .array(_, let values)? = field(.addresses) { addresses = values.compactMap(\.stringValue) }
        let known = if case .int32(let s)? = status { s != ReachabilityStatus.unknown.rawValue } else { false }
        let raw = if case .uint32(let f)? = flags { f } else { UInt32(0) }
        self.init(
            flags: known ? ReachabilityFlags(rawValue: raw) : nil, interface: string(.interface),
            interfaceType: InterfaceType(rawValue: string(.interfaceType)) ?? .other, addresses: addresses,
            connectivity: Connectivity(rawValue: string(.connectivity)) ?? .unknown, isMetered: bool(.metered),
            isVPN: bool(.vpn), reachableIPv4: bool(.reachableIPv4), reachableIPv6: bool(.reachableIPv6),
            reason: Reason(rawValue: string(.reason)), error: string(.error))
    }
}

extension PathState {
    /// The `…Path` interface's properties as a value; anything missing or of
    /// another type reads as nothing (no interface, no flag, false, unknown quality).
    init(properties p: [String: DBusValue]) {
        func bool(_ name: String) -> Bool { if case .boolean(true)? = p[name] { true } else { false } }
        var flags = ReachabilityFlags()
        if case .uint32(let raw)? = p[Contract.Path.flags.name] { flags = ReachabilityFlags(rawValue: raw) }
        var interfaces: [PathInterface] = []
        if case .array(_, let entries)? = p[Contract.Path.interfaces.name] {
            interfaces = entries.compactMap(PathInterface.init)
        }
        let quality = p[Contract.Path.linkQuality.name]?.stringValue.flatMap { LinkQuality(rawValue: $0) }
        self.init(interfaces: interfaces, flags: flags, dnsConfigured: bool(Contract.Path.dnsConfigured.name),
                  isExpensive: bool(Contract.Path.expensive.name), isConstrained: bool(Contract.Path.constrained.name),
                  linkQuality: quality ?? .unknown,
                  reason: p[Contract.Path.reason.name]?.stringValue.flatMap { Reason(rawValue: $0) })
    }
}

extension PathInterface {
    /// One `(sisbbbas)` entry of `Interfaces`: name, index, type, vpn, IPv4, IPv6, gateways.
    init?(_ value: DBusValue) {
        guard case .structure(let fields) = value, fields.count == 7,
            case .string(let name) = fields[0], case .int32(let index) = fields[1],
            case .string(let type) = fields[2], case .boolean(let vpn) = fields[3],
            case .boolean(let ipv4) = fields[4], case .boolean(let ipv6) = fields[5],
            case .array(_, let gateways) = fields[6]
        else { return nil }
        self.init(name: name, index: index, type: InterfaceType(rawValue: type) ?? .other, isVPN: vpn,
                  usableIPv4: ipv4, usableIPv6: ipv6, gateways: gateways.compactMap(\.stringValue))
    }
}
