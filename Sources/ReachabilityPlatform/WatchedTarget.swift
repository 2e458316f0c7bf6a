import ReachabilityCore
import ReachabilityLoop

/// One target being evaluated — the internet, a host or an address — by a
/// `TargetEvaluator`, which alone changes its state and its lookup, and tells its
/// `EvaluationSink` what changed.
@LoopActor
public final class WatchedTarget {
    /// How far the resolution of a host target has come.
    public enum Resolution: Equatable, Sendable {
        case pending
        /// The resolver's addresses, parsed once, in resolver order.
        case resolved([IPAddress])
        case failed(String)
    }

    public let kind: TargetKind
    /// The normalised host name or address literal; `""` for the internet.
    public let name: String
    /// The literal of an address target.
    public let address: IPAddress?
    public private(set) var state: TargetState = .unknown
    /// The answers of the callers the uid rules route otherwise than the evaluating
    /// process, per answer class (`TargetEvaluator.answerClass(of:)`); empty without
    /// uid rules. `state` is everybody else's.
    public internal(set) var views: [AnswerClass: TargetState] = [:]

    // Host targets only.
    public internal(set) var resolution: Resolution = .pending
    /// The user its lookups are charged to (the first holder's).
    public var owner: UserID = 0
    var lookup: Resolver.Lookup?
    /// A network change arrived while a lookup was in flight: look up again when it ends.
    var lookupAgain = false

    /// The local address of a pair target.
    public let local: IPAddress?

    public init(kind: TargetKind, name: String, address: IPAddress? = nil, local: IPAddress? = nil) {
        self.kind = kind
        self.name = name
        self.address = address
        self.local = local
    }

    /// The internet target.
    public convenience init() { self.init(kind: .internet, name: "") }

    /// A host, address or address-pair target (a pair's remote address is its `address`).
    public convenience init(_ input: TargetInput) {
        switch input {
        // The unspecified address is Apple's internet target (`reachabilityForInternetConnection`
        // creates it with 0.0.0.0): watched, it is the internet, held like any target.
        case .address(let address) where AddressText.isUnspecified(address.description):
            self.init(kind: .internet, name: input.name, address: address)
        case .address(let address): self.init(kind: .address, name: input.name, address: address)
        case .host: self.init(kind: .host, name: input.name)
        case .pair(let local, let remote): self.init(kind: .pair, name: input.name, address: remote, local: local)
        }
    }

    /// What was asked for: the target's input (the internet has none; a host's is its name).
    public var input: TargetInput {
        switch kind {
        case .pair: .pair(local: local, remote: address)
        case .address: .address(address!)
        case .internet: address.map { .address($0) } ?? .host(name)
        case .host: .host(name)
        }
    }

    /// Takes a new evaluation; returns the old state when it differs, `nil` when not.
    func update(_ new: TargetState) -> TargetState? {
        guard new != state else { return nil }
        defer { state = new }
        return state
    }

    /// Stops any work for this target (it is going away).
    public func cancel() {
        lookup?.cancel()
        lookup = nil
    }

    /// Whether the state is a real answer: not waiting for a host's first lookup.
    public var isSettled: Bool { kind != .host || resolution != .pending }
}
