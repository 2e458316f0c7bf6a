import ReachabilityCore
import ReachabilityLoop

/// One target being evaluated — the internet, a host, an address or an address
/// pair — by a `TargetEvaluator`, which alone changes its state and its lookups,
/// and tells its `EvaluationSink` what changed.
///
/// What it is lives in one value, `spec`, with the data and the state of its kind;
/// everything that differs per kind (its `Kind`, name, input, whether it is looked
/// up, how it is evaluated) is an exhaustive `switch` over it, so a new kind is a
/// compile error wherever it needs a rule of its own.
@LoopActor
public final class WatchedTarget {
    /// What is watched, with what only its kind has.
    public enum Spec {
        /// The internet: the root object's (`nil`), or the unspecified address a caller
        /// watched (Apple's `reachabilityForInternetConnection` creates its target with
        /// 0.0.0.0), which it keeps as its input.
        case internet(IPAddress?)
        /// A host name, and its lookups.
        case host(WatchedHost)
        case address(IPAddress)
        /// A local and/or a remote address of one family (`WatchAddressPair`). Boxed: two
        /// addresses inline would double every target's size for the rarest kind.
        indirect case pair(local: IPAddress?, remote: IPAddress?)
    }

    public let spec: Spec
    public private(set) var state: TargetState = .unknown
    /// The answers of the callers the uid rules route otherwise than the evaluating
    /// process, per answer class (`TargetEvaluator.answerClass(of:)`); empty without
    /// uid rules. `state` is everybody else's.
    public internal(set) var views: [AnswerClass: TargetState] = [:]

    private init(_ spec: Spec) {
        self.spec = spec
    }

    /// The internet target.
    public convenience init() { self.init(.internet(nil)) }

    /// The target of what a caller asked for; a host's lookups are charged to `owner`.
    public convenience init(_ input: TargetInput, owner: UserID = 0) {
        switch input {
        // The unspecified address is Apple's internet target (`reachabilityForInternetConnection`
        // creates it with 0.0.0.0): watched, it is the internet, held like any target.
        case .address(let address) where AddressText.isUnspecified(address.description):
            self.init(.internet(address))
        case .address(let address): self.init(.address(address))
        case .host(let name): self.init(.host(WatchedHost(name: name, owner: owner)))
        case .pair(let local, let remote): self.init(.pair(local: local, remote: remote))
        }
    }

    /// The exported `Kind`.
    public var kind: TargetKind {
        switch spec {
        case .internet: .internet
        case .host: .host
        case .address: .address
        case .pair: .pair
        }
    }

    /// The exported `Name`: the normalised host name, the address literal, a pair's two
    /// literals joined by a comma (`TargetInput.name`); `""` for the root's internet.
    public var name: String {
        switch spec {
        case .internet(let asked): asked?.description ?? ""
        case .host(let host): host.name
        case .address(let address): address.description
        case .pair(let local, let remote): TargetInput.pair(local: local, remote: remote).name
        }
    }

    /// What was asked for (what the target is held by); `nil` for the root's internet.
    public var input: TargetInput? {
        switch spec {
        case .internet(let asked): asked.map { .address($0) }
        case .host(let host): .host(host.name)
        case .address(let address): .address(address)
        case .pair(let local, let remote): .pair(local: local, remote: remote)
        }
    }

    /// How the log names it: "internet" for either internet target.
    public var logName: String {
        switch spec {
        case .internet: "internet"
        case .host, .address, .pair: name
        }
    }

    /// The name lookups of a target that is looked up (a host); `nil` for the others.
    public var host: WatchedHost? {
        switch spec {
        case .host(let host): host
        case .internet, .address, .pair: nil
        }
    }

    /// Whether the state is a real answer: not waiting for a host's first lookup.
    public var firstLookupFinished: Bool { host.map { $0.resolution != .pending } ?? true }

    /// Takes a new evaluation; returns the old state when it differs, `nil` when not.
    func update(_ new: TargetState) -> TargetState? {
        guard new != state else { return nil }
        defer { state = new }
        return state
    }

    /// Stops any work for this target (it is going away).
    public func cancel() { host?.cancel() }
}

/// A host target's own part: its name, the last answer of its lookups, the lookup in flight
/// or the retry owed.
@LoopActor
public final class WatchedHost {
    /// How far the resolution has come.
    public enum Resolution: Equatable, Sendable {
        case pending
        /// The resolver's addresses, in resolver order.
        case resolved([IPAddress])
        case failed(String)

        /// A lookup's answer. An unspecified address (a blocking resolver's 0.0.0.0 or `::`)
        /// is where a connect to it goes: the local host (127.0.0.1, `::1`).
        init(_ result: Result<[IPAddress], ResolveError>) {
            switch result {
            case .success(let addresses): self = .resolved(addresses.map(Self.connected))
            case .failure(let error): self = .failed(error.message)
            }
        }

        private static let loopback = (v4: try! IPAddress(parsing: "127.0.0.1"), v6: try! IPAddress(parsing: "::1"))

        private static func connected(_ address: IPAddress) -> IPAddress {
            guard AddressText.isUnspecified(address.description) else { return address }
            return address.family == .ipv4 ? loopback.v4 : loopback.v6
        }
    }

    /// The normalised ASCII name.
    public let name: String
    public internal(set) var resolution: Resolution = .pending
    /// The user its lookups are charged to (the first holder's).
    public let owner: UserID
    var lookup: (any NameLookup)?
    /// A network change arrived while a lookup was in flight: look up again when it ends.
    var lookupAgain = false
    /// `lookup` asks only how long the last answer lives (`NameResolver.lifetime`): a new
    /// reason to look the name up replaces it at once.
    var isAskingLifetime = false
    /// Temporary failures in a row since the last answer or fresh lookup: how long the
    /// next retry waits (`LookupSchedule`). One byte, beside the flags: with the
    /// reference below, a host still takes the allocation it took without them.
    var temporaryFailures: UInt8 = 0
    /// The DNS TTL of the last answer (seconds; 0: none known): a lookup that gives the same
    /// addresses again keeps it instead of asking it again. In the padding before the
    /// reference below: a host takes the allocation it took without it.
    var ttl: UInt32 = 0
    /// Where a lookup is owed, while one is (weak: the evaluator owns it).
    weak var schedule: LookupSchedule?

    init(name: String, owner: UserID) {
        self.name = name
        self.owner = owner
    }

    /// The addresses its state is evaluated from (none while pending or failed).
    var addresses: [IPAddress] {
        if case .resolved(let addresses) = resolution { return addresses }
        return []
    }

    func cancel() {
        lookup?.cancel()
        lookup = nil
        schedule?.forget(self)
    }
}
