import ReachabilityBus
import ReachabilityCore
import ReachabilityPlatform

// The daemon's properties as values: a target's (`…Target`, and `Query`'s details) and
// the path object's (`…Path`).

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
        networkIdentity = p[Contract.Path.networkIdentity.name]?.stringValue ?? ""
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
