import ReachabilityCore
import ReachabilityLoop

/// Everything an evaluation reads of the network, behind one seam: the live
/// kernel and NetworkManager (`NetworkObserver`), or answers recorded from them
/// that a test replays. The evaluator asks nothing of the network but through it.
@LoopActor
public protocol NetworkFactSource: AnyObject {
    /// The cached route answers the kernel's events have made stale since the
    /// last call (the events still queued included).
    func takeRouteInvalidation() -> RouteInvalidation
    /// Links, NetworkManager's devices and connectivity, the backend.
    func facts() -> NetworkFacts
    /// The kernel's route for each address (`ip route get`); `nil`: no route.
    func routes(to addresses: [IPAddress]) -> [RouteFact?]
    /// The routing-table entry for each address for packets bound to a link
    /// (`ip route get fibmatch ADDR oif LINK`); `nil`: none leads there.
    func routes(bound queries: [(address: IPAddress, interface: Int32)]) -> [RouteFact?]
    /// The kernel's route for packets from each local address to each remote one
    /// (`ip route get REMOTE from LOCAL`); `nil`: no route, or the source is not this host's.
    func routes(pairs: [(local: IPAddress, remote: IPAddress)]) -> [RouteFact?]
    /// The kernel's route for each address for packets of `uid` (`RTA_UID`).
    func routes(to addresses: [IPAddress], uid: UserID) -> [RouteFact?]
    /// The kernel's route from each local address to each remote one for packets of `uid`.
    func routes(pairs: [(local: IPAddress, remote: IPAddress)], uid: UserID) -> [RouteFact?]
    /// The routing policy's uid rules (`ip rule … uidrange`).
    func uidRules() -> UIDRules
    /// The link `address` is configured on; `nil`: none.
    func link(holding address: IPAddress) -> Int32?
    /// The links unicast routes of any table leave through: through a gateway,
    /// or on-link (what a tunnel's underlay needs, `Engine.hasUnderlay`).
    func routedLinks() -> (viaGateway: Set<Int32>, onLink: Set<Int32>)
    /// Every source has given its first answer (the kernel's is there at once;
    /// NetworkManager's once libnm's client is made, or could not be): facts
    /// read from now on are the ones the backend chose, not a guess made while
    /// one source is still silent.
    var hasFirstAnswer: Bool { get }
    /// Name resolution is configured.
    func dnsConfigured() -> Bool
    /// The gateways whose neighbour state can move the cached answers: their
    /// neighbour events make answers stale, nobody else's do.
    func follow(gateways: Set<String>)
    /// The link-layer address of `address`'s neighbour entry on `link` (a gateway's);
    /// `nil` when there is none or it is not resolved.
    func neighbour(of address: IPAddress, on link: Int32) -> [UInt8]?
    /// The DNS configuration in a comparable form (name servers, search domains).
    func dnsConfiguration() -> String
}

extension NetworkFactSource {
    /// A source with nothing to wait for (answers recorded from the network) has its first answer at once.
    public var hasFirstAnswer: Bool { true }
    /// The kernel's route for each address as packets of `uid` would take it
    /// (`RTA_UID`). A source that knows no uid rules answers as for anybody.
    public func routes(to addresses: [IPAddress], uid: UserID) -> [RouteFact?] { routes(to: addresses) }
    /// The routes from local addresses for packets of `uid`; as for anybody by default.
    public func routes(pairs: [(local: IPAddress, remote: IPAddress)], uid: UserID) -> [RouteFact?] {
        routes(pairs: pairs)
    }
    /// The routing policy's uid rules (`ip rule … uidrange`); none by default.
    public func uidRules() -> UIDRules { UIDRules() }
    /// The link-layer address of a neighbour (a gateway) on a link; none known by default.
    public func neighbour(of address: IPAddress, on link: Int32) -> [UInt8]? { nil }
    /// The DNS configuration in a comparable form (name servers, search domains); "" by default.
    public func dnsConfiguration() -> String { "" }
}
