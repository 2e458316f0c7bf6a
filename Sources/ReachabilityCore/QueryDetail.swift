/// The keys of `Manager.Query`'s `details` dictionary (the contract's prose lists
/// them), written once for the daemon that fills it and the client that reads it.
public enum QueryDetail: String, CaseIterable, Sendable {
    case interface
    case interfaceType = "interface-type"
    case addresses
    case connectivity
    case metered
    case vpn
    case reachableIPv4 = "reachable-ipv4"
    case reachableIPv6 = "reachable-ipv6"
    case reason
    case error

    /// The `…Target` property that carries the same fact.
    public var property: ContractProperty {
        switch self {
        case .interface: Contract.Target.interface
        case .interfaceType: Contract.Target.interfaceType
        case .addresses: Contract.Target.addresses
        case .connectivity: Contract.Target.connectivity
        case .metered: Contract.Target.metered
        case .vpn: Contract.Target.vpn
        case .reachableIPv4: Contract.Target.reachableIPv4
        case .reachableIPv6: Contract.Target.reachableIPv6
        case .reason: Contract.Target.reason
        case .error: Contract.Target.error
        }
    }
}
