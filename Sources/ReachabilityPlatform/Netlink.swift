import CNetlink
import Glibc
import ReachabilityCore
import ReachabilityLoop

/// rtnetlink, the kernel's routing interface. Every netlink syscall of the
/// project goes through this file, and through `Syscall`.
@LoopActor
public final class Netlink {
    let fd: Int32
    var sequence: UInt32 = 0
    /// Kernel-only interface facts (sysfs reads) cached per index and name.
    private var kernelTypes: [String: (InterfaceType, Bool)] = [:]

    /// Opens a request socket. Wraps `socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE)`.
    public init() throws(NetlinkError) {
        fd = try Syscall.netlink("socket") {
            socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), NETLINK_ROUTE)
        }
    }

    deinit { close(fd) }

    // MARK: Requests

    /// Sends a request and collects every message of the answer (a dump ends with NLMSG_DONE).
    func request(type: UInt16, flags: Int32, payload: [UInt8]) throws(NetlinkError) -> [(UInt16, [UInt8])] {
        sequence &+= 1
        let seq = sequence
        var header = nlmsghdr()
        header.nlmsg_len = UInt32(MemoryLayout<nlmsghdr>.size + payload.count)
        header.nlmsg_type = type
        header.nlmsg_flags = UInt16(NLM_F_REQUEST | flags)
        header.nlmsg_seq = seq
        var message = withUnsafeBytes(of: header) { Array($0) }
        message += payload
        let sent = try Syscall.netlink("send") { message.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) } }
        guard sent == message.count else { throw NetlinkError(operation: "send", errno: EMSGSIZE) }

        var result: [(UInt16, [UInt8])] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        let isDump = flags & NLM_F_DUMP == NLM_F_DUMP
        while true {
            let n = try Syscall.netlink("recv") {
                buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            }
            guard n > 0 else { throw NetlinkError(operation: "recv", errno: ECONNRESET) }
            for (hdr, body) in Self.messages(in: buffer[0..<n]) where hdr.nlmsg_seq == seq {
                switch Int32(hdr.nlmsg_type) {
                case NLMSG_DONE:
                    return result
                case NLMSG_ERROR:
                    let code: Int32 = body.count >= 4 ? body.withUnsafeBytes { $0.loadUnaligned(as: Int32.self) } : 0
                    if code == 0 { return result }
                    throw NetlinkError(operation: "request", errno: -code)
                default:
                    result.append((hdr.nlmsg_type, body))
                    if !isDump { return result }
                }
            }
        }
    }

    /// Splits a datagram into netlink messages (NLMSG_ALIGN redone by hand).
    nonisolated static func messages(in data: ArraySlice<UInt8>) -> [(nlmsghdr, [UInt8])] {
        var out: [(nlmsghdr, [UInt8])] = []
        var offset = data.startIndex
        let headerSize = MemoryLayout<nlmsghdr>.size
        while data.endIndex - offset >= headerSize {
            let hdr = data[offset..<offset + headerSize].withUnsafeBytes { $0.loadUnaligned(as: nlmsghdr.self) }
            let length = Int(hdr.nlmsg_len)
            guard length >= headerSize, offset + length <= data.endIndex else { break }
            out.append((hdr, Array(data[offset + headerSize..<offset + length])))
            offset += (length + 3) & ~3
        }
        return out
    }

    /// Attributes (`rtattr`) from `offset` on: type → payload.
    nonisolated static func attributes(_ body: [UInt8], from offset: Int) -> [UInt16: [UInt8]] {
        var out: [UInt16: [UInt8]] = [:]
        var i = offset
        while body.count - i >= 4 {
            let length = Int(body[i]) | Int(body[i + 1]) << 8
            let type = (UInt16(body[i + 2]) | UInt16(body[i + 3]) << 8) & 0x3FFF  // without NLA_F_* bits
            guard length >= 4, i + length <= body.count else { break }
            out[type] = Array(body[i + 4..<i + length])
            i += (length + 3) & ~3
        }
        return out
    }

    nonisolated static func int32(_ bytes: [UInt8]?) -> Int32? {
        guard let bytes, bytes.count >= 4 else { return nil }
        return bytes.withUnsafeBytes { $0.loadUnaligned(as: Int32.self) }
    }

    nonisolated static func string(_ bytes: [UInt8]?) -> String? {
        guard let bytes else { return nil }
        return String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
    }

    // MARK: Links

    /// Every link, by index (`RTM_GETLINK` dump).
    public func links() throws(NetlinkError) -> [Int32: LinkFact] {
        var payload = ifinfomsg()
        payload.ifi_family = UInt8(AF_UNSPEC)
        let answer = try request(type: UInt16(RTM_GETLINK), flags: NLM_F_DUMP,
                                 payload: withUnsafeBytes(of: payload) { Array($0) })
        var links: [Int32: LinkFact] = [:]
        for (type, body) in answer where type == RTM_NEWLINK {
            guard let link = parseLink(body) else { continue }
            links[link.index] = link
        }
        return links
    }

    func parseLink(_ body: [UInt8]) -> LinkFact? {
        let size = MemoryLayout<ifinfomsg>.size
        guard body.count >= size else { return nil }
        let info = body.withUnsafeBytes { $0.loadUnaligned(as: ifinfomsg.self) }
        let attrs = Self.attributes(body, from: size)
        guard let name = Self.string(attrs[UInt16(IFLA_IFNAME)]) else { return nil }
        let kind = attrs[UInt16(IFLA_LINKINFO)].flatMap {
            Self.string(Self.attributes($0, from: 0)[UInt16(IFLA_INFO_KIND)])
        }
        let operState: LinkFact.OperState =
            switch attrs[UInt16(IFLA_OPERSTATE)]?.first.map(Int32.init) {
            case Int32(REACH_IF_OPER_UP): .up
            case Int32(REACH_IF_OPER_UNKNOWN), nil: .unknown
            default: .down
            }
        let (type, tunnel) = kernelType(name: name, arphrd: info.ifi_type, kind: kind, flags: info.ifi_flags)
        return LinkFact(
            index: info.ifi_index, name: name,
            isUp: info.ifi_flags & UInt32(IFF_UP) != 0,
            hasCarrier: info.ifi_flags & reach_iff_lower_up() != 0,
            operState: operState, kernelType: type, isTunnel: tunnel,
            isPointToPoint: info.ifi_flags & UInt32(IFF_POINTOPOINT) != 0,
            group: Self.int32(attrs[UInt16(IFLA_GROUP)]).map { UInt32(bitPattern: $0) } ?? 0,
            master: Self.int32(attrs[UInt16(IFLA_MASTER)]) ?? 0)
    }

    /// The type the kernel tells: ARPHRD, the link kind, and sysfs `DEVTYPE` / `wireless`.
    private func kernelType(name: String, arphrd: UInt16, kind: String?, flags: UInt32) -> (InterfaceType, Bool) {
        let key = "\(name)/\(arphrd)/\(kind ?? "")"
        if let cached = kernelTypes[key] { return cached }
        let tunnelKinds: Set<String> = ["tun", "wireguard", "ppp", "gre", "gretap", "ipip", "sit", "ip6tnl", "vti", "vti6"]
        var result: (InterfaceType, Bool)
        switch Int32(arphrd) {
        case ARPHRD_LOOPBACK:
            result = (.loopback, false)
        case ARPHRD_ETHER:
            let devtype = Sysfs.devtype(name)
            if devtype == "wlan" || Sysfs.isWireless(name) {
                result = (.wifi, false)
            } else if devtype == "wwan" {
                result = (.wwan, false)
            } else if devtype == "bluetooth" {
                result = (.bluetooth, false)
            } else {
                result = (.ethernet, kind.map(tunnelKinds.contains) ?? false)
            }
        case ARPHRD_PPP, ARPHRD_NONE, ARPHRD_TUNNEL, ARPHRD_TUNNEL6, ARPHRD_IPGRE, ARPHRD_SIT:
            let devtype = Sysfs.devtype(name)
            result = devtype == "wwan" ? (.wwan, false) : (.other, true)
        case ARPHRD_IEEE80211, ARPHRD_IEEE80211_RADIOTAP:
            result = (.wifi, false)
        default:
            result = (.other, flags & UInt32(IFF_POINTOPOINT) != 0)
        }
        if kernelTypes.count > 4096 { kernelTypes.removeAll() }
        kernelTypes[key] = result
        return result
    }

    // MARK: Routes

    /// A route message: the route, its destination prefix length, table and metric.
    nonisolated static func parseRoute(_ body: [UInt8]) -> (RouteFact, UInt8, UInt32, UInt32)? {
        let size = MemoryLayout<rtmsg>.size
        guard body.count >= size else { return nil }
        let msg = body.withUnsafeBytes { $0.loadUnaligned(as: rtmsg.self) }
        let attrs = attributes(body, from: size)
        let kind: RouteFact.Kind
        var rejection: String?
        switch Int32(msg.rtm_type) {
        case Int32(RTN_UNICAST): kind = .unicast
        case Int32(RTN_LOCAL): kind = .local
        case Int32(RTN_UNREACHABLE): (kind, rejection) = (.unusable, "unreachable")
        case Int32(RTN_PROHIBIT): (kind, rejection) = (.unusable, "prohibit")
        case Int32(RTN_BLACKHOLE): (kind, rejection) = (.unusable, "blackhole")
        case Int32(RTN_THROW): (kind, rejection) = (.unusable, "throw")
        default: return nil
        }
        let hops = nextHops(attrs)
        let first = hops.first
        let table = attrs[UInt16(RTA_TABLE.rawValue)].flatMap(int32).map { UInt32(bitPattern: $0) }
            ?? UInt32(msg.rtm_table)
        let metric = attrs[UInt16(RTA_PRIORITY.rawValue)].flatMap(int32).map { UInt32(bitPattern: $0) } ?? 0
        let route = RouteFact(
            kind: kind, hasGateway: first?.hasGateway ?? false, interfaceIndex: first?.interfaceIndex ?? 0,
            gateway: first?.gateway, metric: metric, lifetime: lifetime(attrs),
            source: attrs[UInt16(RTA_PREFSRC.rawValue)].flatMap(addressText), rejection: rejection)
        return (route, msg.rtm_dst_len, table, metric)
    }

    /// One next hop of a route: its link, and its gateway when it has one.
    struct NextHop: Equatable {
        var interfaceIndex: Int32
        var gateway: String?
        var hasGateway: Bool
    }

    /// A route's next hops: its own (`RTA_OIF`, `RTA_GATEWAY`/`RTA_VIA`), or each of
    /// `RTA_MULTIPATH`'s (`struct rtnexthop { u16 len; u8 flags; u8 hops; i32 ifindex; }`
    /// and its attributes), as a lookup's answer or a next-hop group's route gives them.
    nonisolated static func nextHops(_ attrs: [UInt16: [UInt8]]) -> [NextHop] {
        func hop(_ attrs: [UInt16: [UInt8]], interface: Int32) -> NextHop {
            NextHop(interfaceIndex: interface, gateway: nextHop(attrs),
                    hasGateway: attrs[UInt16(RTA_GATEWAY.rawValue)] != nil || attrs[UInt16(RTA_VIA.rawValue)] != nil)
        }
        let own = hop(attrs, interface: int32(attrs[UInt16(RTA_OIF.rawValue)]) ?? 0)
        guard let multipath = attrs[UInt16(RTA_MULTIPATH.rawValue)] else { return [own] }
        var hops: [NextHop] = []
        var offset = 0
        while multipath.count - offset >= 8 {
            let length = Int(multipath[offset]) | Int(multipath[offset + 1]) << 8
            guard length >= 8, offset + length <= multipath.count else { break }
            let index = int32(Array(multipath[offset + 4..<offset + 8])) ?? 0
            hops.append(hop(attributes(Array(multipath[offset..<offset + length]), from: 8), interface: index))
            offset += (length + 3) & ~3
        }
        return hops.isEmpty ? [own] : hops
    }

    /// How long the kernel goes on using a routing entry, in milliseconds: its
    /// `RTA_CACHEINFO` expiry (`struct rta_cacheinfo`, `rta_expires` in `USER_HZ`
    /// ticks of 10 ms, positive while the entry has a lifetime left); `nil` without one.
    nonisolated static func lifetime(_ attrs: [UInt16: [UInt8]]) -> UInt32? {
        guard let info = attrs[UInt16(RTA_CACHEINFO.rawValue)], info.count >= 12,
            let expires = int32(Array(info[8..<12])), expires > 0
        else { return nil }
        return UInt32(expires) * 10
    }

    /// The next hop's address literal: `RTA_GATEWAY` (an address of the route's
    /// family), or `RTA_VIA` (`struct rtvia { u16 family; u8 addr[]; }`, an IPv6
    /// next hop of an IPv4 route).
    nonisolated static func nextHop(_ attrs: [UInt16: [UInt8]]) -> String? {
        if let gateway = attrs[UInt16(RTA_GATEWAY.rawValue)] { return addressText(gateway) }
        if let via = attrs[UInt16(RTA_VIA.rawValue)], via.count > 2 { return addressText(Array(via[2...])) }
        return nil
    }

    /// An IPv4 (4 bytes) or IPv6 (16 bytes) address as text (`inet_ntop`).
    nonisolated static func addressText(_ bytes: [UInt8]) -> String? {
        let family: Int32
        switch bytes.count {
        case 4: family = AF_INET
        case 16: family = AF_INET6
        default: return nil
        }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let ok = bytes.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count)) != nil }
        guard ok else { return nil }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Listens to the kernel's link, address, route, rule, next-hop, neighbour and
/// device-configuration multicast groups, reports that something changed, and
/// says which cached route answers the events may have made stale
/// (`StalenessClassifier`, whose table lists every event and why). The facts
/// themselves are re-read once per coalesced evaluation.
@LoopActor
public final class NetlinkMonitor {
    private let fd: Int32
    private var source: SourceHandle?
    /// Where events are read into; kept, since every evaluation reads the socket once more.
    private var receiveBuffer = [UInt8](repeating: 0, count: 32768)
    /// What each event makes stale.
    public private(set) var classifier = StalenessClassifier()
    /// The socket's receive buffer asked for: 4 MiB.
    static let receiveBufferSize: Int32 = 4 << 20

    /// Binds to the groups. Wraps `bind(2)` on an `AF_NETLINK` socket.
    public init(onChange: @escaping (RouteInvalidation) -> Void) throws(NetlinkError) {
        fd = try Syscall.netlink("socket") {
            socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue),
                   NETLINK_ROUTE)
        }
        var address = sockaddr_nl()
        address.nl_family = sa_family_t(AF_NETLINK)
        address.nl_groups = reach_rtmgrp_all()
        let socketFD = fd
        // Room for a burst (a neighbour table filling, a thousand routes): events that do not
        // fit are lost, and losing them costs an evaluation of everything. Beyond `rmem_max`
        // only with CAP_NET_ADMIN (`SO_RCVBUFFORCE`); otherwise as much as the system allows.
        var size: Int32 = Self.receiveBufferSize
        let length = socklen_t(MemoryLayout<Int32>.size)
        if setsockopt(socketFD, SOL_SOCKET, SO_RCVBUFFORCE, &size, length) != 0 {
            _ = setsockopt(socketFD, SOL_SOCKET, SO_RCVBUF, &size, length)
        }
        do {
            _ = try Syscall.netlink("bind") {
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(socketFD, $0, socklen_t(MemoryLayout<sockaddr_nl>.size))
                    }
                }
            }
        } catch {
            close(socketFD)
            throw error
        }
        source = Sources.readable(fd: socketFD) { [unowned self] in
            if let invalidation = self.readQueued() { onChange(invalidation) }
            return true
        }
    }

    /// Reads every event the kernel has queued on the socket; `nil` when there was none
    /// that can move an answer. Also called right before an evaluation, so that a change
    /// the kernel made before it counts in it (its route lookups would see the change,
    /// its cache would not).
    public func readQueued() -> RouteInvalidation? {
        var sawSomething = false
        var invalidation = RouteInvalidation()
        reading: while true {
            switch Syscall.call({
                receiveBuffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            }) {
            case .success(let n) where n > 0:
                for (header, body) in Netlink.messages(in: receiveBuffer[0..<n]) {
                    let event = Self.event(header.nlmsg_type, body)
                    let stale = classifier.classify(event)
                    // Neighbours of addresses that are no followed gateway, other device settings:
                    // read, and nothing more (no evaluation is scheduled for them).
                    guard !stale.isEmpty || event.changesFacts else { continue }
                    sawSomething = true
                    invalidation.formUnion(stale)
                }
            case .failure(.noBufferSpace):
                // The kernel dropped events; forget every cached answer.
                Log.debug("kernel events were lost (ENOBUFS): every answer is asked again")
                sawSomething = true
                invalidation.formUnion(classifier.classify(.lost))
            default:
                break reading
            }
        }
        return sawSomething ? invalidation : nil
    }

    /// Takes the links' state from a dump made after the socket was bound, so that a
    /// link's first event is compared with it instead of being taken as "everything
    /// about this link changed".
    public func seed(_ links: [Int32: LinkFact]) {
        classifier.seed(links: links.values.map {
            ($0.index, $0.isUp, $0.hasCarrier, LinkSelectors(name: $0.name, group: $0.group, master: $0.master))
        })
    }

    /// Follows the neighbour state of these gateways (those of the cached answers).
    public func follow(gateways: Set<String>) {
        classifier.follow(gateways: gateways)
    }

    /// One rtnetlink message as the classifier's event.
    nonisolated static func event(_ type: UInt16, _ body: [UInt8]) -> KernelEvent {
        switch Int32(type) {
        case Int32(RTM_NEWLINK), Int32(RTM_DELLINK):
            guard body.count >= MemoryLayout<ifinfomsg>.size else { return .lost }
            let info = body.withUnsafeBytes { $0.loadUnaligned(as: ifinfomsg.self) }
            if Int32(type) == Int32(RTM_DELLINK) { return .linkRemoved(index: info.ifi_index) }
            let attrs = Netlink.attributes(body, from: MemoryLayout<ifinfomsg>.size)
            let selectors = Netlink.string(attrs[UInt16(IFLA_IFNAME)]).map { name in
                LinkSelectors(name: name, group: Netlink.int32(attrs[UInt16(IFLA_GROUP)]).map { UInt32(bitPattern: $0) } ?? 0,
                              master: Netlink.int32(attrs[UInt16(IFLA_MASTER)]) ?? 0)
            }
            return .link(index: info.ifi_index, isUp: info.ifi_flags & UInt32(IFF_UP) != 0,
                         hasCarrier: info.ifi_flags & reach_iff_lower_up() != 0, selectors: selectors)
        case Int32(RTM_NEWNEIGH), Int32(RTM_DELNEIGH):
            guard body.count >= MemoryLayout<ndmsg>.size else { return .other }
            let message = body.withUnsafeBytes { $0.loadUnaligned(as: ndmsg.self) }
            guard let destination = Netlink.attributes(body, from: MemoryLayout<ndmsg>.size)[UInt16(NDA_DST)],
                let address = Netlink.addressText(destination)
            else { return .other }
            let state = Int32(type) == Int32(RTM_DELNEIGH) ? NeighbourState.absent : NeighbourState(nud: message.ndm_state)
            return .neighbour(address: address, state: state)
        case Int32(RTM_NEWNETCONF), Int32(RTM_DELNETCONF):
            // struct netconfmsg { u8 ncm_family; }, then attributes from NLMSG_ALIGN(1).
            let attrs = Netlink.attributes(body, from: 4)
            return .deviceConfiguration(ignoresLinkdownRoutes: attrs[UInt16(NETCONFA_IGNORE_ROUTES_WITH_LINKDOWN)] != nil)
        case Int32(RTM_NEWROUTE), Int32(RTM_DELROUTE), Int32(RTM_NEWADDR), Int32(RTM_DELADDR),
            Int32(RTM_NEWRULE), Int32(RTM_DELRULE), Int32(RTM_NEWNEXTHOP), Int32(RTM_DELNEXTHOP):
            return .routing
        default:
            return .other
        }
    }

    isolated deinit {
        source?.cancel()
        close(fd)
    }
}

public struct NetlinkError: Error, CustomStringConvertible {
    public let operation: String
    public let errno: Int32
    public var description: String { "netlink \(operation): \(Errno(rawValue: errno))" }
}

/// `/sys/class/net/IF/…` reads for the interface type.
enum Sysfs {
    /// A file's text (a file of `/sys` or `/proc`, or with `limit`, up to that many bytes).
    static func read(_ path: String, limit: Int? = nil) -> String? { Syscall.readFile(path, limit: limit ?? 4096) }

    static func isSafeName(_ name: String) -> Bool {
        !name.isEmpty && name != "." && name != ".." && !name.contains("/")
    }

    /// `DEVTYPE=` from `/sys/class/net/IF/uevent`.
    static func devtype(_ name: String) -> String? {
        guard isSafeName(name), let uevent = read("/sys/class/net/\(name)/uevent") else { return nil }
        for line in uevent.split(separator: "\n") where line.hasPrefix("DEVTYPE=") {
            return String(line.dropFirst("DEVTYPE=".count))
        }
        return nil
    }

    /// `/sys/class/net/IF/wireless` exists.
    static func isWireless(_ name: String) -> Bool {
        guard isSafeName(name) else { return false }
        return access("/sys/class/net/\(name)/wireless", F_OK) == 0
    }
}
