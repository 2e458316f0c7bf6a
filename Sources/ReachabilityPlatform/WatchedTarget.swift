import ReachabilityCore
import ReachabilityLoop

/// One target being evaluated — the internet, a host, an address or an address
/// pair — by a `TargetEvaluator`, which alone changes its state and its work,
/// and tells its `EvaluationSink` what changed.
///
/// What it is is one `TargetInput` (`TargetDescription`), from which its `Kind`, name,
/// path and log name derive; what its kind needs done before it has an answer (a host's
/// lookups) is its `work`. Everything evaluated per kind is an exhaustive `switch` over
/// `spec`, so a new kind is a compile error wherever it needs a rule of its own.
@LoopActor
public final class WatchedTarget {
    public let spec: TargetInput
    /// A host's lookups; `nil` for a kind answered from the facts alone (`spec.work`).
    public let host: WatchedHost?
    public private(set) var state: TargetState = .unknown
    /// The answers of the callers the uid rules route otherwise than the evaluating
    /// process, per answer class (`TargetEvaluator.answerClass(of:)`); empty without
    /// uid rules. `state` is everybody else's.
    public internal(set) var views: [AnswerClass: TargetState] = [:]

    /// The internet target.
    public convenience init() { self.init(.internet(nil)) }

    /// The target of what a caller asked for; a host's lookups are charged to `owner`.
    public init(_ input: TargetInput, owner: UserID = 0) {
        spec = input
        switch input {
        case .host(let name): host = WatchedHost(name: name, owner: owner)
        case .internet, .address, .pair: host = nil
        }
    }

    /// The asynchronous work the answer waits for (a host's lookups).
    public var work: (any TargetWork)? { host }

    /// The exported `Kind`.
    public var kind: TargetKind { spec.kind }

    /// The exported `Name` (`TargetDescription.name`); `""` for the root's internet.
    public var name: String { spec.name }

    /// How the log names it: "internet" for either internet target.
    public var logName: String { spec.logName }

    /// Whether the state is a real answer: not waiting for its work's first result (a host's
    /// first lookup).
    public var firstLookupFinished: Bool { work?.hasFirstResult ?? true }

    /// Takes a new evaluation; returns the old state when it differs, `nil` when not.
    func update(_ new: TargetState) -> TargetState? {
        guard new != state else { return nil }
        defer { state = new }
        return state
    }

    /// Stops any work for this target (it is going away).
    public func cancel() { work?.cancel() }
}

/// The asynchronous work a kind of target needs for its answers (`TargetWorkKind`): a
/// host's name lookups today; what any new kind needs (a probe) conforms too.
@LoopActor
public protocol TargetWork: AnyObject {
    /// Whether its first result is in: before, the target's state is not an answer.
    var hasFirstResult: Bool { get }
    /// Stops it (the target is going away).
    func cancel()
}

/// A host target's own part: its name, the last answer of its lookups, the lookup in flight
/// or the retry owed.
@LoopActor
public final class WatchedHost: TargetWork {
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

    public var hasFirstResult: Bool { resolution != .pending }

    public func cancel() {
        lookup?.cancel()
        lookup = nil
        schedule?.forget(self)
    }
}
