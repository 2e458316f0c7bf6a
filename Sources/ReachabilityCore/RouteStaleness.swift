/// Which kernel events can move the kernel's answer to "which route would a
/// packet take", and so which cached answers they make stale. Pure: the
/// platform layer parses rtnetlink into `KernelEvent`s and asks a
/// `StalenessClassifier`, which keeps the little state the rules need (each
/// link's last flags, each followed gateway's last neighbour state).
///
/// The events, and why each can move an answer:
///
/// | event | why | stale |
/// |---|---|---|
/// | route, rule, next-hop object added or removed | the lookup itself changes | every answer |
/// | address added or removed | its local and prefix routes come and go with it | every answer |
/// | link removed | its routes and next hops go without a route event | answers through it |
/// | link's group, name or master changed | `ip rule` selects by them (`suppress_ifgroup`, `oif`/`iif` by name, `l3mdev`), without a rule event | every answer |
/// | link down, or carrier lost | IPv4 flushes the link's routes and next-hop objects without `RTM_DELROUTE`/`RTM_DELNEXTHOP`, and a multipath route is rebalanced over its live next hops | every answer |
/// | link up, or carrier back | dead next hops revive, silently | every answer |
/// | ARP switched off or on (`IFF_NOARP`) | the kernel stops, or starts, resolving next hops on the link | every answer |
/// | neighbour state of a followed gateway | with several default routes the kernel prefers a gateway whose neighbour is not failed (IPv4 `fib_select_default`, IPv6 router reachability) | every answer |
/// | neighbour of any other address | cannot move an answer | none |
/// | `ignore_routes_with_linkdown` switched (`RTM_NEWNETCONF`) | routes through links without carrier are used, or skipped, from then on | every answer |
/// | other device configuration (forwarding, `rp_filter`…) | not part of an output lookup | none |
/// | an answer's lifetime ends (`RTA_CACHEINFO` expiry, an RA's default route) | the kernel stops using an expired route before it deletes it | every answer (a timer, not an event) |
/// | events lost (`ENOBUFS`) | anything may have changed | every answer |
public enum KernelEvent: Sendable, Equatable {
    /// `RTM_NEWLINK` with the link's `IFF_UP` and carrier (`IFF_LOWER_UP`) bits, and what
    /// policy rules select links by (`nil`: not told, not compared), and its `IFF_NOARP`
    /// bit (`nil`: not told, not compared).
    case link(index: Int32, isUp: Bool, hasCarrier: Bool, selectors: LinkSelectors? = nil, hasNoARP: Bool? = nil)
    /// `RTM_DELLINK`.
    case linkRemoved(index: Int32)
    /// A route, policy rule, next-hop object or address was added or removed.
    case routing
    /// `RTM_NEWNEIGH` / `RTM_DELNEIGH` for `address` (its literal), in `state` (`.absent` when removed).
    /// `linkLayer`: its `NDA_LLADDR` when the message has one (another router behind the
    /// same address is another network: `NetworkIdentity`).
    case neighbour(address: String, state: NeighbourState, linkLayer: [UInt8]? = nil)
    /// `RTM_NEWNETCONF`; `ignoresLinkdownRoutes` tells whether it carries
    /// `NETCONFA_IGNORE_ROUTES_WITH_LINKDOWN` (the one setting an output lookup reads).
    case deviceConfiguration(ignoresLinkdownRoutes: Bool)
    /// The kernel dropped events (`ENOBUFS` on the socket).
    case lost
    /// Anything else on the socket.
    case other

    /// Whether the event can change the facts an evaluation reads besides route
    /// answers (a link's name, state or type; its addresses), so that it is
    /// evaluated even when it makes no answer stale.
    public var changesFacts: Bool {
        switch self {
        case .link, .linkRemoved, .routing, .lost: true
        case .neighbour, .deviceConfiguration, .other: false
        }
    }
}

/// What `ip rule` can select a link by: its group (`suppress_ifgroup`), its name
/// (`oif`/`iif` match names, not indexes) and its master (`l3mdev`, a VRF).
public struct LinkSelectors: Sendable, Hashable {
    public var name: String
    public var group: UInt32
    public var master: Int32

    public init(name: String, group: UInt32 = 0, master: Int32 = 0) {
        self.name = name
        self.group = group
        self.master = master
    }
}

/// A neighbour entry's state, in the classes the kernel's route choice tells apart
/// (`NUD_*`): reachable, valid but not confirmed (stale, delay, probe, permanent,
/// noarp), being resolved, failed, or no entry.
public enum NeighbourState: Sendable, Hashable {
    case reachable, valid, incomplete, failed, absent

    /// From the `ndm_state` bits of a neighbour message.
    public init(nud: UInt16) {
        switch nud {
        case _ where nud & 0x02 != 0: self = .reachable  // NUD_REACHABLE
        case _ where nud & (0x04 | 0x08 | 0x10 | 0x40 | 0x80) != 0: self = .valid  // STALE DELAY PROBE NOARP PERMANENT
        case _ where nud & 0x20 != 0: self = .failed  // NUD_FAILED
        case _ where nud & 0x01 != 0: self = .incomplete  // NUD_INCOMPLETE
        default: self = .absent  // NUD_NONE
        }
    }
}

/// Which cached route answers a batch of kernel events may have made stale.
public struct RouteInvalidation: Sendable, Equatable {
    /// Every answer (a route, rule, next-hop or address changed, or events were lost).
    public var all = false
    /// Answers whose route leaves through these links.
    public var links: Set<Int32> = []

    public init(all: Bool = false, links: Set<Int32> = []) {
        self.all = all
        self.links = links
    }

    public var isEmpty: Bool { !all && links.isEmpty }

    public mutating func formUnion(_ other: RouteInvalidation) {
        all = all || other.all
        links.formUnion(other.links)
    }
}

/// Classifies kernel events (the table on `KernelEvent`). The state it keeps: each
/// link's last up and carrier bits (so that an event that changes neither is not
/// taken for a change), and the gateways to follow with their last neighbour state.
public struct StalenessClassifier: Sendable {
    private var linkState: [Int32: (isUp: Bool, hasCarrier: Bool, selectors: LinkSelectors?, hasNoARP: Bool?)] = [:]
    /// The gateways whose neighbour state can move an answer: those of the cached
    /// answers, and those they replaced (a gateway that failed and was left can come
    /// back), with the last state seen (`nil`: none seen yet).
    public private(set) var gateways: [String: NeighbourState?] = [:]
    /// The followed gateways' last link-layer addresses.
    private var gatewayLinkLayers: [String: [UInt8]] = [:]
    /// Neighbour events about addresses that are no followed gateway: counted, never evaluated.
    public private(set) var ignoredNeighbourEvents = 0

    public init() {}

    /// Takes each link's state from a dump made after the socket was bound, so that
    /// a link's first event is compared with it. An event queued before the dump is
    /// older than it: compared with it, it can only invalidate needlessly, never miss.
    public mutating func seed(links: [(index: Int32, isUp: Bool, hasCarrier: Bool)]) {
        seed(links: links.map { ($0.index, $0.isUp, $0.hasCarrier, nil) })
    }

    /// The same, with what rules select each link by.
    public mutating func seed(links: [(index: Int32, isUp: Bool, hasCarrier: Bool, selectors: LinkSelectors?)]) {
        seed(links: links.map { ($0.index, $0.isUp, $0.hasCarrier, $0.selectors, nil) })
    }

    /// The same, with each link's `IFF_NOARP` bit.
    public mutating func seed(
        links: [(index: Int32, isUp: Bool, hasCarrier: Bool, selectors: LinkSelectors?, hasNoARP: Bool?)]
    ) {
        for link in links where linkState[link.index] == nil {
            linkState[link.index] = (link.isUp, link.hasCarrier, link.selectors, link.hasNoARP)
        }
    }

    /// Follows the neighbour state of these gateways from now on (added to those
    /// followed already: a gateway an answer left stays followed).
    public mutating func follow(gateways addresses: Set<String>) {
        // Bounded: past this many, only the gateways in use now are followed.
        if gateways.count + addresses.count > Self.followedLimit {
            gateways = gateways.filter { addresses.contains($0.key) }
            gatewayLinkLayers = gatewayLinkLayers.filter { addresses.contains($0.key) }
        }
        for address in addresses where gateways[address] == nil {
            gateways[address] = .some(nil)
        }
    }

    /// The most gateways followed at once.
    public static let followedLimit = 4096

    /// What `event` makes stale.
    public mutating func classify(_ event: KernelEvent) -> RouteInvalidation {
        switch event {
        case .routing, .lost:
            return RouteInvalidation(all: true)
        case .linkRemoved(let index):
            linkState[index] = nil
            return RouteInvalidation(links: [index])
        case .link(let index, let isUp, let hasCarrier, let selectors, let hasNoARP):
            let previous = linkState[index]
            linkState[index] = (isUp, hasCarrier, selectors ?? previous?.selectors, hasNoARP ?? previous?.hasNoARP)
            // A new link: answers can only have named it by index after it existed.
            guard let previous else { return RouteInvalidation(links: [index]) }
            // Down or up, carrier lost or back: the kernel flushes or revives routes and
            // next hops of the link without a route event, and rebalances multipath routes.
            if previous.isUp != isUp || previous.hasCarrier != hasCarrier { return RouteInvalidation(all: true) }
            // A rule may select the link by group, name or master: any answer may move.
            if let selectors, let before = previous.selectors, selectors != before { return RouteInvalidation(all: true) }
            // ARP off or on: next hops on the link stop, or start, being resolved.
            if let hasNoARP, let before = previous.hasNoARP, hasNoARP != before { return RouteInvalidation(all: true) }
            return RouteInvalidation()
        case .neighbour(let address, let state, let linkLayer):
            guard let last = gateways[address] else {
                ignoredNeighbourEvents += 1
                return RouteInvalidation()
            }
            gateways[address] = state
            // Another router behind the gateway's address: the same routes, another network.
            var moved = false
            if let linkLayer {
                moved = gatewayLinkLayers[address].map { $0 != linkLayer } ?? false
                gatewayLinkLayers[address] = linkLayer
            }
            // Stale, delay and probe are alike to the kernel's choice; a first sighting counts.
            return last == state && !moved ? RouteInvalidation() : RouteInvalidation(all: true)
        case .deviceConfiguration(let ignoresLinkdownRoutes):
            return RouteInvalidation(all: ignoresLinkdownRoutes)
        case .other:
            return RouteInvalidation()
        }
    }
}

/// The verdict on each gateway a route answer goes through (`RouteFact.nextHopFailed`), from the
/// kernel's neighbour entry as read with the answer, and whether to have the kernel resolve it.
/// Pure; the platform reads the entries and the links' carrier counts, and sends what resolves.
///
/// - Resolved (reachable, or valid: stale, delay, probe, permanent): alive.
/// - No entry: not known, and resolved now while its link can carry a packet (at start, after
///   a replug: the carrier's loss flushed it), not at a program's first packet.
/// - Failed (ARP or neighbour discovery went unanswered), seen on the same segment as the entry
///   was seen before (the link's carrier count unchanged): dead until resolved again, and the
///   kernel's new attempts meanwhile (`INCOMPLETE`, at a program's next packet) keep that. A
///   failed entry first seen on this segment — left from before a carrier change, or from before
///   the service started — says nothing of the gateway now: it is resolved again, and not dead
///   until the kernel says so again.
public struct NextHopVerdicts: Sendable {
    /// A gateway on a link (an IPv6 link-local gateway is another on each link).
    public struct Key: Sendable, Hashable {
        public var address: String
        public var link: Int32

        public init(address: String, link: Int32) {
            self.address = address
            self.link = link
        }
    }

    /// Each gateway's last verdict, and its link's carrier count then.
    private var last: [Key: (failed: Bool, carrier: UInt32)] = [:]

    /// The most gateways remembered at once.
    public static let limit = 64

    public init() {}

    /// `key`'s entry read in `state` while its link's carrier count is `carrier` and the link
    /// can carry packets or not: whether the gateway is dead, and whether to resolve it now.
    public mutating func observe(_ key: Key, state: NeighbourState, carrier: UInt32, linkUsable: Bool)
        -> (failed: Bool, resolve: Bool)
    {
        let before = last[key].flatMap { $0.carrier == carrier ? $0.failed : nil }
        let verdict: (failed: Bool, resolve: Bool)
        switch state {
        case .reachable, .valid: verdict = (false, false)
        case .absent: verdict = (false, linkUsable)
        case .incomplete: verdict = (before ?? false, false)
        case .failed: verdict = before != nil ? (true, false) : (false, linkUsable)
        }
        if last[key] == nil && last.count >= Self.limit { last.removeAll() }
        last[key] = (verdict.failed, carrier)
        return verdict
    }
}
