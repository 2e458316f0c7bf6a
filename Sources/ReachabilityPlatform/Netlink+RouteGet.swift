import CNetlink
import Glibc
import ReachabilityCore

extension Netlink {
    /// The route the kernel would use for `address`, like `ip route get ADDR`
    /// (`RTM_GETROUTE` with `RTA_DST`, and `RTA_OIF` for a scoped IPv6 address).
    /// `nil` when the kernel has no route (`ENETUNREACH`, `EHOSTUNREACH`).
    public func route(to address: IPAddress) throws(NetlinkError) -> RouteFact? {
        try routes(to: [address])[0]
    }

    /// The routes to many addresses: up to 128 requests per `send`, the answers
    /// read in bulk (two system calls per batch instead of two per address). An
    /// IPv6 answer carries the lifetime of the entry it came from (an RA's default
    /// route expires).
    public func routes(to addresses: [IPAddress]) throws(NetlinkError) -> [RouteFact?] {
        try routesWithLifetimes(addresses.map { Query(address: $0) })
    }

    /// The same, as packets of `uid` would be routed (`RTA_UID`: the policy's
    /// `uidrange` rules then answer for that user, not for the asking process).
    public func routes(to addresses: [IPAddress], uid: UInt32) throws(NetlinkError) -> [RouteFact?] {
        try routesWithLifetimes(addresses.map { Query(address: $0, uid: uid) })
    }

    /// The uid ranges of the routing policy's rules, both families (`RTM_GETRULE`
    /// dump, `FRA_UID_RANGE`; the kernel gives it only for a rule that has one).
    public func uidRules() throws(NetlinkError) -> UIDRules {
        var ranges: [ClosedRange<UInt32>] = []
        for family in [AF_INET, AF_INET6] {
            var message = fib_rule_hdr()
            message.family = UInt8(family)
            let answer = try request(type: UInt16(RTM_GETRULE), flags: NLM_F_DUMP,
                                     payload: withUnsafeBytes(of: message) { Array($0) })
            for (type, body) in answer where type == RTM_NEWRULE && body.count >= MemoryLayout<fib_rule_hdr>.size {
                let attrs = Self.attributes(body, from: MemoryLayout<fib_rule_hdr>.size)
                guard let range = attrs[UInt16(FRA_UID_RANGE)], range.count >= 8,
                    let start = Self.int32(Array(range[0..<4])), let end = Self.int32(Array(range[4..<8]))
                else { continue }
                let (low, high) = (UInt32(bitPattern: start), UInt32(bitPattern: end))
                if low <= high { ranges.append(low...high) }
            }
        }
        return UIDRules(ranges: ranges)
    }

    /// The routing-table entries packets to each address would match if bound to
    /// its link (`RTA_OIF`, with `RTM_F_FIB_MATCH`), as leaving through that link,
    /// or `nil` where no entry leads there. Asked without `RTM_F_FIB_MATCH`, the
    /// kernel answers a lookup bound to a link that has no route with an invented
    /// on-link route through it (when another link has an on-link route, such
    /// as a tun device's default route); the entry itself cannot be invented.
    /// A multipath entry is answered with the next hop through that link (its gateway).
    public func routes(bound queries: [(address: IPAddress, interface: Int32)]) throws(NetlinkError) -> [RouteFact?] {
        try routes(queries.map { Query(address: $0.address, interface: $0.interface, source: nil, fibMatch: true) })
    }

    /// The routes packets from each local address to each remote one would take, like
    /// `ip route get REMOTE from LOCAL` (`RTA_SRC`); `nil` where the kernel has none, or
    /// refuses the source (an address not configured here).
    public func routes(pairs: [(local: IPAddress, remote: IPAddress)], uid: UInt32? = nil) throws(NetlinkError)
        -> [RouteFact?]
    {
        try routesWithLifetimes(pairs.map { Query(address: $0.remote, source: $0.local, uid: uid) })
    }

    /// The answers to `queries` (routes a packet takes), each IPv6 one with the lifetime of
    /// the entry it came from: the plain answer has none, so each IPv6 query is asked again
    /// with `RTM_F_FIB_MATCH`, whose entry has its `RTA_CACHEINFO` expiry.
    private func routesWithLifetimes(_ queries: [Query]) throws(NetlinkError) -> [RouteFact?] {
        let ipv6 = queries.indices.filter { queries[$0].address.family == .ipv6 }
        let answers = try routes(queries + ipv6.map { var entry = queries[$0]; entry.fibMatch = true; return entry })
        var result = Array(answers[0..<queries.count])
        for (k, i) in ipv6.enumerated() where result[i] != nil {
            result[i]?.lifetime = answers[queries.count + k]?.lifetime
        }
        return result
    }

    /// The link `address` is configured on (`RTM_GETADDR` dump: `IFA_LOCAL`, or
    /// `IFA_ADDRESS` where there is none), `nil` when no link has it.
    public func link(holding address: IPAddress) throws(NetlinkError) -> Int32? {
        var message = ifaddrmsg()
        message.ifa_family = UInt8(address.family == .ipv4 ? AF_INET : AF_INET6)
        let answer = try request(type: UInt16(RTM_GETADDR), flags: NLM_F_DUMP,
                                 payload: withUnsafeBytes(of: message) { Array($0) })
        for (type, body) in answer where type == RTM_NEWADDR && body.count >= MemoryLayout<ifaddrmsg>.size {
            let header = body.withUnsafeBytes { $0.loadUnaligned(as: ifaddrmsg.self) }
            let attrs = Self.attributes(body, from: MemoryLayout<ifaddrmsg>.size)
            let configured = attrs[UInt16(IFA_LOCAL)] ?? attrs[UInt16(IFA_ADDRESS)]
            if configured == address.bytes, address.scopeIndex == 0 || Int32(header.ifa_index) == address.scopeIndex {
                return Int32(header.ifa_index)
            }
        }
        return nil
    }

    /// The links the unicast routes of every table leave through, through a gateway
    /// or on-link (a dump of each family's routes: `ip route show table all`).
    public func routedLinks() throws(NetlinkError) -> (viaGateway: Set<Int32>, onLink: Set<Int32>) {
        var viaGateway = Set<Int32>()
        var onLink = Set<Int32>()
        for family in [AF_INET, AF_INET6] {
            var message = rtmsg()
            message.rtm_family = UInt8(family)
            let answer = try request(type: UInt16(RTM_GETROUTE), flags: NLM_F_DUMP,
                                     payload: withUnsafeBytes(of: message) { Array($0) })
            for (type, body) in answer where type == RTM_NEWROUTE && body.count >= MemoryLayout<rtmsg>.size {
                let header = body.withUnsafeBytes { $0.loadUnaligned(as: rtmsg.self) }
                guard Int32(header.rtm_type) == Int32(RTN_UNICAST) else { continue }
                for hop in Self.nextHops(Self.attributes(body, from: MemoryLayout<rtmsg>.size)) {
                    if hop.hasGateway { viaGateway.insert(hop.interfaceIndex) } else { onLink.insert(hop.interfaceIndex) }
                }
            }
        }
        return (viaGateway, onLink)
    }

    /// One route question: a destination, the link its packets are bound to, and
    /// whether the routing entry is asked for instead of the route a packet takes.
    private struct Query {
        var address: IPAddress
        var interface: Int32?
        /// The packet's source address (`RTA_SRC`).
        var source: IPAddress?
        var fibMatch = false
        /// The uid whose packets are meant (`RTA_UID`); `nil`: the asking process's.
        var uid: UInt32?

        init(address: IPAddress, interface: Int32? = nil, source: IPAddress? = nil, fibMatch: Bool = false,
             uid: UInt32? = nil) {
            self.address = address
            self.interface = interface
            self.source = source
            self.fibMatch = fibMatch
            self.uid = uid
        }
    }

    private func routes(_ queries: [Query]) throws(NetlinkError) -> [RouteFact?] {
        var results = [RouteFact?](repeating: nil, count: queries.count)
        var start = 0
        while start < queries.count {
            let batch = start..<min(start + 128, queries.count)
            var buffer: [UInt8] = []
            var indexBySequence: [UInt32: Int] = [:]
            for i in batch {
                sequence &+= 1
                indexBySequence[sequence] = i
                buffer += Self.routeRequest(queries[i], sequence: sequence)
            }
            let sent = try Syscall.netlink("send") { buffer.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) } }
            guard sent == buffer.count else { throw NetlinkError(operation: "send", errno: EMSGSIZE) }
            while !indexBySequence.isEmpty {
                for datagram in try receiveMany() {
                    for (header, body) in Self.messages(in: datagram[...]) {
                        guard let index = indexBySequence.removeValue(forKey: header.nlmsg_seq) else { continue }
                        if header.nlmsg_type == NLMSG_ERROR {
                            let code: Int32 = body.count >= 4 ? body.withUnsafeBytes { $0.loadUnaligned(as: Int32.self) } : 0
                            results[index] = Self.refusal(errno: -code, query: queries[index])
                        } else if header.nlmsg_type == RTM_NEWROUTE, var (route, _, _, _) = Self.parseRoute(body) {
                            // Asked with a source, the kernel echoes it in `RTA_SRC` and gives no `RTA_PREFSRC`.
                            if route.source == nil, let source = queries[index].source { route.source = source.description }
                            if let bound = queries[index].interface {
                                route.interfaceIndex = bound
                                let hops = Self.nextHops(Self.attributes(body, from: MemoryLayout<rtmsg>.size))
                                if let hop = hops.first(where: { $0.interfaceIndex == bound }) {
                                    route.gateway = hop.gateway
                                    route.hasGateway = hop.hasGateway
                                }
                            }
                            results[index] = route
                        }
                        // NLMSG_ERROR: no route (ENETUNREACH…): nil; a route that refuses: `unusable`.
                    }
                }
            }
            start = batch.upperBound
        }
        return results
    }

    /// The answer a lookup's error stands for: the kernel answers a lookup that ends
    /// on an `unreachable`, `prohibit` or `blackhole` route with that route's error
    /// (`EHOSTUNREACH`, `EACCES`, `EINVAL`), and one that finds no route with
    /// `ENETUNREACH`. Asked with a source, `EINVAL` means the source is not this
    /// host's: no route.
    private nonisolated static func refusal(errno code: Int32, query: Query) -> RouteFact? {
        let rejection: String
        switch code {
        case EHOSTUNREACH: rejection = "unreachable"
        case EACCES: rejection = "prohibit"
        case EINVAL where query.source == nil: rejection = "blackhole"
        default: return nil
        }
        return RouteFact(kind: .unusable, hasGateway: false, interfaceIndex: 0, rejection: rejection)
    }

    /// Every address of every link (`RTM_GETADDR` dump), with its DAD state
    /// (`ifa_flags`, extended by `IFA_FLAGS`) and scope.
    public func addresses() throws(NetlinkError) -> [AddressFact] {
        var message = ifaddrmsg()
        message.ifa_family = UInt8(AF_UNSPEC)
        let answer = try request(type: UInt16(RTM_GETADDR), flags: NLM_F_DUMP,
                                 payload: withUnsafeBytes(of: message) { Array($0) })
        return answer.compactMap { type, body in type == RTM_NEWADDR ? Self.parseAddress(body) : nil }
    }

    /// One `RTM_NEWADDR` message as an address fact.
    nonisolated static func parseAddress(_ body: [UInt8]) -> AddressFact? {
        guard body.count >= MemoryLayout<ifaddrmsg>.size else { return nil }
        let header = body.withUnsafeBytes { $0.loadUnaligned(as: ifaddrmsg.self) }
        let attrs = attributes(body, from: MemoryLayout<ifaddrmsg>.size)
        guard let bytes = attrs[UInt16(IFA_LOCAL)] ?? attrs[UInt16(IFA_ADDRESS)], let text = addressText(bytes)
        else { return nil }
        let flags = int32(attrs[UInt16(IFA_FLAGS)]).map { UInt32(bitPattern: $0) } ?? UInt32(header.ifa_flags)
        let scope: AddressFact.Scope =
            switch Int32(header.ifa_scope) {
            case Int32(RT_SCOPE_UNIVERSE.rawValue): .global
            case Int32(RT_SCOPE_SITE.rawValue): .site
            case Int32(RT_SCOPE_LINK.rawValue): .link
            default: .host
            }
        return AddressFact(
            address: text, family: bytes.count == 4 ? .ipv4 : .ipv6, interfaceIndex: Int32(header.ifa_index),
            scope: scope, isTentative: flags & UInt32(IFA_F_TENTATIVE) != 0,
            isDADFailed: flags & UInt32(IFA_F_DADFAILED) != 0, isOptimistic: flags & UInt32(IFA_F_OPTIMISTIC) != 0,
            prefixLength: header.ifa_prefixlen)
    }

    /// The link-layer address of `address`'s neighbour entry on `link`; `nil` when there is
    /// none or it has none yet (incomplete, failed).
    public func neighbour(of address: IPAddress, on link: Int32) throws(NetlinkError) -> [UInt8]? {
        try neighbourEntry(of: address, on: link).linkLayer
    }

    /// `address`'s neighbour entry on `link` (`RTM_GETNEIGH` for one entry, `ip neigh get ADDR
    /// dev LINK`): its state (`.absent` when there is none) and its link-layer address, if any.
    public func neighbourEntry(of address: IPAddress, on link: Int32) throws(NetlinkError)
        -> (state: NeighbourState, linkLayer: [UInt8]?)
    {
        var message = ndmsg()
        message.ndm_family = UInt8(address.family == .ipv4 ? AF_INET : AF_INET6)
        message.ndm_ifindex = link
        let payload = withUnsafeBytes(of: message) { Array($0) } + Self.attribute(UInt16(NDA_DST), address.bytes)
        let answer: [(UInt16, [UInt8])]
        do {
            answer = try request(type: UInt16(RTM_GETNEIGH), flags: 0, payload: payload)
        } catch where error.errno == ENOENT {
            return (.absent, nil)
        }
        guard let (type, body) = answer.first, type == RTM_NEWNEIGH, body.count >= MemoryLayout<ndmsg>.size
        else { return (.absent, nil) }
        let entry = body.withUnsafeBytes { $0.loadUnaligned(as: ndmsg.self) }
        return (NeighbourState(nud: entry.ndm_state), Self.attributes(body, from: MemoryLayout<ndmsg>.size)[UInt16(NDA_LLADDR)])
    }

    /// Waits for answers and returns every datagram queued, up to 64 per system
    /// call: one route answer is one datagram. Wraps `recvmmsg(2)`.
    private func receiveMany() throws(NetlinkError) -> [[UInt8]] {
        let size = 4096
        let raw = receiveArea.bytes
        let count = raw.count / size
        var result: [[UInt8]] = []
        _ = try Syscall.netlink("recvmmsg") {
            var vectors = (0..<count).map { i in iovec(iov_base: raw.baseAddress! + i * size, iov_len: size) }
            return vectors.withUnsafeMutableBufferPointer { iov in
                var headers = (0..<count).map { i in
                    reach_mmsghdr(msg_hdr: msghdr(msg_name: nil, msg_namelen: 0, msg_iov: iov.baseAddress! + i,
                                            msg_iovlen: 1, msg_control: nil, msg_controllen: 0, msg_flags: 0),
                            msg_len: 0)
                }
                // Block for the first datagram only, then take what is queued.
                let n = reach_recvmmsg(fd, &headers, UInt32(count), Int32(REACH_MSG_WAITFORONE))
                if n > 0 {
                    for i in 0..<Int(n) {
                        let start = i * size
                        result.append(Array(raw[start..<start + Int(headers[i].msg_len)]))
                    }
                }
                return n
            }
        }
        return result
    }

    /// One `RTM_GETROUTE` request (bound to a link if the query says so), with its header.
    private nonisolated static func routeRequest(_ query: Query, sequence: UInt32) -> [UInt8] {
        let address = query.address
        var message = rtmsg()
        message.rtm_family = UInt8(address.family == .ipv4 ? AF_INET : AF_INET6)
        message.rtm_dst_len = UInt8(address.bytes.count * 8)
        if query.fibMatch {
            message.rtm_flags = UInt32(RTM_F_FIB_MATCH)
        }
        if let source = query.source {
            message.rtm_src_len = UInt8(source.bytes.count * 8)
        }
        var payload = withUnsafeBytes(of: message) { Array($0) }
        payload += attribute(UInt16(RTA_DST.rawValue), address.bytes)
        if let source = query.source {
            payload += attribute(UInt16(RTA_SRC.rawValue), source.bytes)
        }
        if let oif = query.interface ?? (address.scopeIndex != 0 ? address.scopeIndex : nil) {
            payload += attribute(UInt16(RTA_OIF.rawValue), withUnsafeBytes(of: oif) { Array($0) })
        }
        if let uid = query.uid {
            payload += attribute(UInt16(RTA_UID.rawValue), withUnsafeBytes(of: uid) { Array($0) })
        }
        // The packet answers are for: TCP to port 443, what most clients send (HTTPS), so that
        // `ip rule … ipproto tcp` / `dport 443` rules are asked about (kernel 4.17 and later).
        payload += attribute(UInt16(RTA_IP_PROTO.rawValue), [UInt8(IPPROTO_TCP)])
        payload += attribute(UInt16(RTA_DPORT.rawValue), [UInt8(443 >> 8), UInt8(443 & 0xFF)])
        var header = nlmsghdr()
        header.nlmsg_len = UInt32(MemoryLayout<nlmsghdr>.size + payload.count)
        header.nlmsg_type = UInt16(RTM_GETROUTE)
        header.nlmsg_flags = UInt16(NLM_F_REQUEST)
        header.nlmsg_seq = sequence
        return withUnsafeBytes(of: header) { Array($0) } + payload
    }

    /// One `rtattr` with its payload, padded to 4 bytes.
    nonisolated static func attribute(_ type: UInt16, _ payload: [UInt8]) -> [UInt8] {
        let length = UInt16(4 + payload.count)
        var out = withUnsafeBytes(of: length) { Array($0) } + withUnsafeBytes(of: type) { Array($0) } + payload
        while out.count % 4 != 0 { out.append(0) }
        return out
    }
}

/// An IPv4 or IPv6 address literal, parsed with `inet_pton`, with its
/// canonical text (`inet_ntop`) and, for a scoped IPv6 address, its interface.
public struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    public let family: AddressFamily
    public let bytes: [UInt8]
    /// The interface index of a scope (`fe80::1%eth0`), 0 when none.
    public let scopeIndex: Int32
    /// The canonical text, with the scope as given by name (`fe80::1%eth0`).
    public let description: String

    public enum ParseError: Error, Equatable {
        case notAnAddress
        case unknownScope(String)
    }

    /// Parses `text` as an address literal; `IPv4` only in dotted-quad form
    /// (`inet_pton` rejects `1.2.3`, octal and hex forms).
    public init(parsing text: String) throws(ParseError) {
        var literal = Substring(text)
        var scopeName: Substring?
        if let percent = text.firstIndex(of: "%") {
            literal = text[..<percent]
            scopeName = text[text.index(after: percent)...]
        }
        var v4 = in_addr()
        var v6 = in6_addr()
        if scopeName == nil, inet_pton(AF_INET, String(literal), &v4) == 1 {
            family = .ipv4
            bytes = withUnsafeBytes(of: v4) { Array($0) }
            scopeIndex = 0
        } else if inet_pton(AF_INET6, String(literal), &v6) == 1 {
            family = .ipv6
            bytes = withUnsafeBytes(of: v6) { Array($0) }
            if let scopeName {
                let index = scopeName.allSatisfy(\.isNumber) && !scopeName.isEmpty
                    ? Int32(scopeName) ?? 0 : Int32(bitPattern: if_nametoindex(String(scopeName)))
                guard index > 0, !scopeName.isEmpty else { throw .unknownScope(String(scopeName)) }
                scopeIndex = index
            } else {
                scopeIndex = 0
            }
        } else {
            throw .notAnAddress
        }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let af = family == .ipv4 ? AF_INET : AF_INET6
        bytes.withUnsafeBytes { _ = inet_ntop(af, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
        let canonical = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        description = scopeName.map { canonical + "%" + $0 } ?? canonical
    }
}
