/// Why a target (or the path) is not reachable: one stable word, exported as
/// `Reason` (the contract's XML lists the vocabulary), with the detail in words
/// beside it (`Error`). The engine finds it next to the flag rule that failed.
public enum Reason: String, Sendable, Hashable, CaseIterable {
    /// The kernel has no route to the destination (`ENETUNREACH`), or none a socket can take
    /// (an IPv6 link-local address without its link: `connect` fails with `EINVAL`).
    case noRoute = "no-route"
    /// The route the kernel chose refuses packets: `unreachable`, `prohibit`,
    /// `blackhole` or `throw`.
    case rejected
    /// The route leaves through a link that is not up (`IFF_UP` unset).
    case linkDown = "link-down"
    /// The route leaves through a link that is up without carrier (`IFF_LOWER_UP`
    /// unset, or operstate down).
    case noCarrier = "no-carrier"
    /// The route leaves through a broadcast link with ARP off (`IFF_NOARP`): the
    /// kernel resolves no neighbour on it, so no packet reaches the next hop.
    case noNeighbour = "no-neighbour"
    /// The route is there, but the kernel's answer has no source address a packet
    /// can leave with (tentative or DAD-failed, link-local, loopback, none).
    case noSourceAddress = "no-source-address"
    /// The route's gateway does not answer on its link: the kernel's neighbour entry for
    /// it failed (ARP or IPv6 neighbour discovery went unanswered), and it has not been
    /// resolved since. Apple's flags would stay set here (they follow routes only).
    case gatewayUnreachable = "gateway-unreachable"
    /// The route goes through a VPN, and no other link can carry the tunnel's packets.
    case noUnderlay = "no-underlay"
    /// NetworkManager reports a captive portal: a login page stands in the way.
    case portal
    /// Nothing is reachable, and a device waits for secrets (NetworkManager's `need-auth`).
    case needsAuth = "needs-auth"
    /// Nothing is reachable, and NetworkManager is activating a connection.
    case connecting
    /// A host's name could not be resolved.
    case lookupFailed = "lookup-failed"
    /// A path exists, but only through interface types the caller prohibited or did
    /// not require (a client's path evaluation, `NWPathMonitor`'s interface choice).
    case interfaceProhibited = "interface-prohibited"

    /// How far a packet got before this cause stopped it: among the causes of
    /// several paths (both families of the internet, every address of a host), the
    /// one that got furthest is the one worth telling (an IPv6-only link whose
    /// address is still tentative says `no-source-address`, not IPv4's `no-route`).
    public var depth: Int {
        switch self {
        case .noRoute: 0
        case .rejected: 1
        case .linkDown: 2
        case .noCarrier: 3
        case .noNeighbour: 4
        case .noUnderlay: 5
        case .noSourceAddress: 6
        case .gatewayUnreachable: 7
        case .interfaceProhibited, .connecting, .needsAuth, .lookupFailed, .portal: 8
        }
    }
}

/// A cause and its sentence ("no carrier on wlan0").
public struct Cause: Sendable, Hashable {
    public var reason: Reason
    public var detail: String

    public init(_ reason: Reason, _ detail: String) {
        self.reason = reason
        self.detail = detail
    }
}
