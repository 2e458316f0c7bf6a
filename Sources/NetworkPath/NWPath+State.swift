import ReachabilityCore

// From the `Path` facts (the daemon's, or the in-process engine's) to what one
// monitor reports. Pure: no C module, no bus, no thread; every rule is here.
//
// - `PathRequirement.permits` — which interfaces a monitor may use;
// - `NWPath.init(_:requirement:)` — status, available interfaces, used types,
//   cost, families, DNS and gateways from those interfaces.

/// What a monitor asks of its path: an interface type it must use, or types it
/// must not use (Apple's `requiredInterfaceType` and `prohibitedInterfaceTypes`).
struct PathRequirement: Hashable, Sendable {
    var required: NWInterface.InterfaceType?
    var prohibited: Set<NWInterface.InterfaceType> = []

    static let any = PathRequirement()

    /// "any", "required: wifi", "prohibited: cellular, other": for `debugDescription`.
    var debugDescription: String {
        if let required { return "required: \(required)" }
        if prohibited.isEmpty { return "any" }
        return "prohibited: " + prohibited.map { "\($0)" }.sorted().joined(separator: ", ")
    }

    /// Whether the monitor may use `interface`, whose own packets (for a tunnel)
    /// leave through `underlay`.
    func permits(_ interface: PathInterface, underlay: PathInterface?) -> Bool {
        let type = NWInterface.InterfaceType(interface.type)
        if let required, type != required { return false }
        if prohibited.contains(type) { return false }
        // A tunnel over a prohibited interface would send its packets there anyway.
        if interface.isVPN, let underlay, prohibited.contains(NWInterface.InterfaceType(underlay.type)) {
            return false
        }
        return true
    }
}

extension NWInterface.InterfaceType {
    /// The contract's interface types in Apple's terms: wifi, wwan (cellular) and
    /// ethernet (wired) have their own; Bluetooth and everything else are `.other`.
    init(_ type: ReachabilityCore.InterfaceType) {
        switch type {
        case .wifi: self = .wifi
        case .wwan: self = .cellular
        case .ethernet: self = .wiredEthernet
        case .loopback: self = .loopback
        case .bluetooth, .other, .none: self = .other
        }
    }
}

extension NWPath.Status {
    /// The internet target's flags in Apple's terms, as the contract's `Flags`
    /// says: reachable without connection-required is satisfied;
    /// connection-required without intervention-required requires a connection
    /// (on demand, on traffic); anything else is unsatisfied.
    init(_ flags: ReachabilityFlags) {
        if flags.contains(.reachable), !flags.contains(.connectionRequired) {
            self = .satisfied
        } else if flags.contains(.connectionRequired), !flags.contains(.interventionRequired) {
            self = .requiresConnection
        } else {
            self = .unsatisfied
        }
    }
}

extension NWPath {
    /// The path a monitor with `requirement` sees in `state`.
    ///
    /// The available interfaces are the permitted ones with a usable route, in
    /// the state's order of preference; traffic leaves through the first. The
    /// internet target's flags speak for the state's preferred interface: a
    /// path through it follows them (a captive portal or NetworkManager's
    /// "no connectivity" makes it unsatisfied even with a route); a path
    /// through another interface is satisfied by its route. With no usable
    /// interface the path is unsatisfied, or requires a connection when the
    /// flags say one comes up on demand and the monitor allows every type.
    /// Cost (`isExpensive`, `isConstrained`) is known for the preferred
    /// interface; another interface is expensive when it is a modem. The link
    /// quality is known for the preferred interface only.
    init(_ state: PathState, requirement: PathRequirement) {
        let usable = state.interfaces.filter(\.isUsable)
        let underlay = usable.first { !$0.isVPN }
        let allowed = usable.filter { requirement.permits($0, underlay: underlay) }
        guard let primary = allowed.first else {
            let onDemand = Status(state.flags) == .requiresConnection && requirement == .any
            // The monitor allows none of the interfaces there are, usable or not: that is its
            // reason, whatever happens to them (a flap of a prohibited link changes nothing).
            let present = state.interfaces
            guard !present.isEmpty, !present.contains(where: { requirement.permits($0, underlay: underlay) })
            else {
                self.init(status: onDemand ? .requiresConnection : .unsatisfied,
                          reason: state.reason?.rawValue ?? "")
                return
            }
            let types = Set(present.map { NWInterface.InterfaceType($0.type) })
            let denied: UnsatisfiedReason = types == [.cellular] ? .cellularDenied
                : types == [.wifi] ? .wifiDenied : .notAvailable
            self.init(status: .unsatisfied, unsatisfiedReason: denied, reason: Reason.interfaceProhibited.rawValue)
            return
        }
        let isPreferred = primary == usable.first
        let status: Status = isPreferred ? Status(state.flags) : .satisfied
        guard status == .satisfied else {
            self.init(status: status, reason: state.reason?.rawValue ?? "")
            return
        }
        var used: Set<NWInterface.InterfaceType> = [NWInterface.InterfaceType(primary.type)]
        if primary.isVPN, let underlay { used.insert(NWInterface.InterfaceType(underlay.type)) }
        let byName = Dictionary(allowed.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        var gateways: [NWEndpoint] = []
        for interface in allowed {
            for literal in interface.gateways {
                guard let endpoint = NWEndpoint(gateway: literal, on: interface, interfaces: byName),
                    !gateways.contains(endpoint)
                else { continue }
                gateways.append(endpoint)
            }
        }
        self.init(
            status: .satisfied,
            availableInterfaces: allowed.map(NWInterface.init),
            usedTypes: used,
            isExpensive: (isPreferred && state.isExpensive) || used.contains(.cellular),
            isConstrained: isPreferred && state.isConstrained,
            supportsIPv4: allowed.contains(where: \.usableIPv4),
            supportsIPv6: allowed.contains(where: \.usableIPv6),
            supportsDNS: state.dnsConfigured,
            gateways: gateways,
            linkQuality: isPreferred ? state.linkQuality : .unknown)
    }
}

extension NWInterface {
    init(_ interface: PathInterface) {
        self.init(name: interface.name, index: Int(interface.index), type: InterfaceType(interface.type))
    }
}

extension NWEndpoint {
    /// A gateway's endpoint: its address, port 0; a link-local IPv6 gateway is
    /// scoped to the interface it was found on (or the one its `%scope` names).
    init?(gateway literal: String, on interface: PathInterface, interfaces: [String: PathInterface]) {
        if let address = IPv4Address(literal) {
            self = .hostPort(host: .ipv4(address), port: .any)
            return
        }
        let parts = literal.split(separator: "%", maxSplits: 1)
        guard let first = parts.first, let address = IPv6Address(String(first)) else { return nil }
        guard address.isLinkLocal else {
            self = .hostPort(host: .ipv6(address), port: .any)
            return
        }
        let scope = parts.count == 2 ? interfaces[String(parts[1])] ?? interface : interface
        self = .hostPort(host: .ipv6(IPv6Address(address.rawValue, NWInterface(scope))!), port: .any)
    }
}
