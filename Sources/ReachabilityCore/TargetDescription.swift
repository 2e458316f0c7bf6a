/// What a target is: the one description from which its kind, name, object path, the
/// Manager call that holds it, its `Query` text, its log name, its metric labels and the
/// asynchronous work it needs all derive. The daemon (`Address` = the platform's address),
/// the engine and the client library (`Address` = the literal it was given or listed with)
/// use it; each derivation is one exhaustive `switch` here, so a new kind is a compile
/// error at every rule it must have (docs/design.md, "Target kinds").
public enum TargetDescription<Address: Hashable & Sendable & CustomStringConvertible>: Hashable, Sendable {
    /// The internet: the root object's (`nil`), or the unspecified address a caller watched
    /// (Apple's `reachabilityForInternetConnection` creates its target with 0.0.0.0), which
    /// it keeps as what was asked for.
    case internet(Address?)
    /// A normalised ASCII host name.
    case host(String)
    case address(Address)
    /// A local and/or a remote address of one family (`WatchAddressPair`). Boxed: two
    /// addresses inline would double every description's size for the rarest kind.
    indirect case pair(local: Address?, remote: Address?)

    /// The exported `Kind`.
    public var kind: TargetKind {
        switch self {
        case .internet: .internet
        case .host: .host
        case .address: .address
        case .pair: .pair
        }
    }

    /// The exported `Name`: the host name, the address literal, a pair's two literals joined
    /// by a comma, either one empty when absent (`192.0.2.10,198.51.100.7`, `,198.51.100.7`);
    /// for the internet, the address it was asked as (`""` for the root's).
    public var name: String {
        switch self {
        case .internet(let asked): asked?.description ?? ""
        case .host(let name): name
        case .address(let address): address.description
        case .pair(let local, let remote): "\(local?.description ?? ""),\(remote?.description ?? "")"
        }
    }

    /// How the log names it: "internet" for either internet target.
    public var logName: String {
        switch self {
        case .internet: "internet"
        case .host, .address, .pair: name
        }
    }

    /// The labels of its object path below the service's root, each escaped
    /// (`PathEscaping`): `host/<name>`, `address/<literal>`, `pair/<local,remote>`; none for
    /// the root's internet, which is the root object itself. The internet asked as an address
    /// is held where that address's object would be.
    public var pathLabels: [String] {
        switch self {
        case .internet(nil): []
        case .internet(let asked?): [TargetKind.address.rawValue, PathEscaping.escapeLabel(asked.description)]
        case .host, .address, .pair: [kind.rawValue, PathEscaping.escapeLabel(name)]
        }
    }

    /// The address the internet is held as by a caller that names no address (Apple's
    /// internet target is 0.0.0.0): a held target whose signals carry the caller's own answer,
    /// where the root object's internet is the system's (with uid rules, not every user's).
    public static var internetAddress: String { "0.0.0.0" }

    /// The Manager method that holds it, and its arguments.
    public var holdingCall: (member: String, arguments: [String]) {
        switch self {
        case .internet(let asked): (Contract.Manager.watchAddress.name, [asked?.description ?? Self.internetAddress])
        case .host(let name): (Contract.Manager.watchHost.name, [name])
        case .address(let address): (Contract.Manager.watchAddress.name, [address.description])
        case .pair(let local, let remote):
            (Contract.Manager.watchAddressPair.name, [local?.description ?? "", remote?.description ?? ""])
        }
    }

    /// `Query`'s argument for it (`""`: the internet); `nil` for a pair, which `Query`'s one
    /// string cannot name (a client asks through its watch).
    public var queryText: String? {
        switch self {
        case .internet, .host, .address: name
        case .pair: nil
        }
    }

    /// The `target` and `kind` labels of its metrics.
    public var metricLabels: [(name: String, value: String)] {
        [("target", name.isEmpty ? "internet" : name), ("kind", kind.metricLabel)]
    }

    /// Whether it was named by a host name (not an address literal, the internet or a pair).
    public var isName: Bool {
        switch self {
        case .host: true
        case .internet, .address, .pair: false
        }
    }

    /// The asynchronous work its answer waits for (`nil`: answered from the facts alone).
    public var work: TargetWorkKind? {
        switch self {
        case .host: .nameLookup
        case .internet, .address, .pair: nil
        }
    }

    /// The same target with each address transformed (a literal for a parsed address).
    public func map<Other>(_ transform: (Address) -> Other) -> TargetDescription<Other> {
        switch self {
        case .internet(let asked): .internet(asked.map(transform))
        case .host(let name): .host(name)
        case .address(let address): .address(transform(address))
        case .pair(let local, let remote): .pair(local: local.map(transform), remote: remote.map(transform))
        }
    }
}

/// The asynchronous work a kind of target needs before and between its answers.
public enum TargetWorkKind: Sendable, Hashable {
    /// Its name is looked up (and again when its answer expires or the network changes).
    case nameLookup
}

extension TargetDescription where Address == String {
    /// A listed target from its exported `Kind` and `Name`; `nil` for a kind this version
    /// does not know (a newer daemon's), which is not taken for another.
    public init?(kind: String, name: String) {
        guard let known = TargetKind(rawValue: kind) else { return nil }
        switch known {
        case .internet: self = .internet(name.isEmpty ? nil : name)
        case .host: self = .host(name)
        case .address: self = .address(name)
        case .pair:
            let sides = name.split(separator: ",", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
            guard sides.count == 2 else { return nil }
            self = .pair(local: sides[0].isEmpty ? nil : sides[0], remote: sides[1].isEmpty ? nil : sides[1])
        }
    }
}

extension TargetKind {
    /// The `kind` label of the target metrics.
    public var metricLabel: String {
        switch self {
        case .internet: "internet"
        case .host: "host"
        case .address: "address"
        case .pair: "pair"
        }
    }
}
