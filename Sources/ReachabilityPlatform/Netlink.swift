import CNetlink
import Glibc
import ReachabilityCore
import ReachabilityLoop

/// rtnetlink, the kernel's routing interface: requests here, links in
/// `Netlink+Links.swift`, route lookups in `Netlink+RouteGet.swift`; the event
/// socket is `NetlinkMonitor`. Every netlink syscall of the project is in these
/// files, and goes through `Syscall`.
@LoopActor
public final class Netlink {
    let fd: Int32
    var sequence: UInt32 = 0
    /// Kernel-only interface facts (sysfs reads) cached per index and name.
    var kernelTypes: [String: (InterfaceType, Bool)] = [:]
    /// Where answers are received: 64 datagrams of 4 KiB (`receiveMany`), or one of 64 KiB
    /// (`request`). Allocated once and never zeroed; a zeroed 256 KiB array a lookup was a
    /// quarter of the daemon's CPU while targets were added (its memset and page faults).
    let receiveArea = ReceiveArea(byteCount: 64 * 4096)

    /// Opens a request socket. Wraps `socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE)`.
    public init() throws(NetlinkError) {
        fd = try Syscall.netlink("socket") {
            socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), NETLINK_ROUTE)
        }
    }

    deinit { close(fd) }

    /// A non-blocking socket of netlink `family` (`NETLINK_ROUTE`, `NETLINK_SOCK_DIAG`) bound to
    /// the multicast `groups` (bind(2)'s mask); `configure` runs on it before the bind (a
    /// receive buffer). Closed again when the bind fails. Wraps `socket(AF_NETLINK, SOCK_RAW)`
    /// and `bind(2)`.
    nonisolated static func multicastSocket(
        family: Int32, groups: UInt32, configure: (Int32) -> Void = { _ in }
    ) throws(NetlinkError) -> Int32 {
        let fd = try Syscall.netlink("socket") {
            socket(AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue),
                   family)
        }
        configure(fd)
        var address = sockaddr_nl()
        address.nl_family = sa_family_t(AF_NETLINK)
        address.nl_groups = groups
        do {
            _ = try Syscall.netlink("bind") {
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(fd, $0, socklen_t(MemoryLayout<sockaddr_nl>.size))
                    }
                }
            }
        } catch {
            close(fd)
            throw error
        }
        return fd
    }

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
        let area = receiveArea.bytes
        let isDump = flags & NLM_F_DUMP == NLM_F_DUMP
        while true {
            let n = try Syscall.netlink("recv") { recv(fd, area.baseAddress, min(area.count, 65536), 0) }
            guard n > 0 else { throw NetlinkError(operation: "recv", errno: ECONNRESET) }
            for (hdr, body) in Self.messages(in: Array(area[0..<n])[...]) where hdr.nlmsg_seq == seq {
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

public struct NetlinkError: Error, CustomStringConvertible {
    public let operation: String
    public let errno: Int32
    public var description: String { "netlink \(operation): \(Errno(rawValue: errno))" }
}

/// Memory the kernel writes answers into, owned by one `Netlink` and used on its thread
/// only. `@unchecked Sendable`, proved: the pointer never changes, and only the loop's
/// `Netlink` reads or writes the bytes.
final class ReceiveArea: @unchecked Sendable {
    let bytes: UnsafeMutableRawBufferPointer
    init(byteCount: Int) { bytes = .allocate(byteCount: byteCount, alignment: 16) }
    deinit { bytes.deallocate() }
}
