import CNetlink
import CNetworkManager
import ReachabilityCore
import ReachabilityLoop
import Testing
@testable import ReachabilityPlatform

/// Netlink answers as the kernel sent them (captured with an `RTM_GETROUTE` or
/// `RTM_GETLINK` request on a Linux 6 machine), parsed without a socket.
@Suite("Netlink messages from captured bytes")
struct NetlinkParsingTests {
    /// A `Netlink` lives on the loop (its socket is a loop source); the link test runs there.
    init() { LoopThread.start() }

    static func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            out.append(UInt8(hex[index..<next], radix: 16)!)
            index = next
        }
        return out
    }

    /// The one message of a datagram, checked to be of `type`.
    static func body(_ hex: String, type: Int32) -> [UInt8]? {
        let messages = Netlink.messages(in: bytes(hex)[...])
        #expect(messages.count == 1)
        guard let (header, body) = messages.first else { return nil }
        #expect(Int32(header.nlmsg_type) == type)
        return body
    }

    // ip route get 127.0.0.1: type local, table local (255), through lo (1).
    static let local = "6800000018000000010000005117000002200000fe0000020002008008000f00fe000000080001007f0000010800040001000000080007007f000001080019000000000024000c00020000003c1a0400000000000000000000000000000000000000000000000000"
    // ip route get 192.0.2.1 on a link of 192.0.2.0/24: unicast, on-link (no gateway), through link 4.
    static let onLink = "6800000018000000020000005117000002200000fe0000010002000008000f00fe00000008000100c0000201080004000400000008000700c0000202080019000000000024000c000200000073860200000000000000000000000000000000000000000000000000"
    // ip route get 198.51.100.7 with "default via 192.0.2.1 dev eth0": unicast through a gateway.
    static let viaGateway = "7000000018000000040000005918000002200000fe0000010002000008000f00fe00000008000100c6336407080004000400000008000700c000020208000500c0000201080019000000000024000c00020000001f1b0400000000000000000000000000000000000000000000000000"
    // ip link show lo (RTM_NEWLINK for index 1, UP, LOWER_UP, operstate unknown).
    static let loopback = "bc0500001000000003000000801b000000000403010000004900010000000000070003006c6f000008000d00e803000005001000000000000500110000000000050043000100000008000400000001000800320000000000080033000000000008001b000000000008001e000000000008003d000000000008001f000100000008002800ffff0000080029000000010008003a000000010008003f0000000100080040000000010008003b00f8ff070008003c00ffff0000080042000000000008002000010000000500210001000000080023000000000008002f000000000008003000000000000600440000000000060045000000000005002700000000000a00010000000000000000000a0002000000000000000000cc001700610000000000000061000000000000006e140000000000006e140000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000006400070061000000610000006e1400006e14000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000c002b0005000200000000000c0006006e6f71756575650030031a008c00020088000100000000000000000000000000010000000100000001000000010000000000000001000000000000000000000000000000000000000000000001000000010000000000000000000000000000000000000000000000000000000000000000000000000000000000000010270000e80300000000000000000000000000000000000001000000a0020a00080001000000008014000500ffff00001200000060990000e8030000f400020000000000400000000000010001000000010000000100000001000000ffffffffa00f0000e8030000ffffffff803a0900805101000300000058020000100000000000000001000000010000000100000060ea0000000000000000000000000000000000000000000000000000ffffffff000000000000000010270000e8030000010000000000000000000000010000000000000000000000010000000000000000000000000000000000000080ee360000000000000000000100000000000000000000000000000000000000000000000004000000000000ffff0000ffffffff0100000000000000000000000000000034010300260000000000000001000000000000008000000000000000000000000000000001000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000003c00060007000000000000000000000000000000010000000000000000000000000000000000000000000000000000000000000000000000000000001400070000000000000000000000000000000000050008000000000024000e00000000000000000000000000000000000000000000000000000000000000000004003e8004004180"

    @Test("a local route: this host's address")
    func localRoute() throws {
        let body = try #require(Self.body(Self.local, type: Int32(RTM_NEWROUTE)))
        let (route, prefix, table, _) = try #require(Netlink.parseRoute(body))
        #expect(route == RouteFact(kind: .local, hasGateway: false, interfaceIndex: 1, source: "127.0.0.1"))
        #expect(prefix == 32)
        #expect(table == 254)
    }

    @Test("an on-link route has no gateway; a default route's has one")
    func unicastRoutes() throws {
        let onLinkBody = try #require(Self.body(Self.onLink, type: Int32(RTM_NEWROUTE)))
        let onLink = try #require(Netlink.parseRoute(onLinkBody))
        #expect(onLink.0 == RouteFact(kind: .unicast, hasGateway: false, interfaceIndex: 4, source: "192.0.2.2"))
        let viaBody = try #require(Self.body(Self.viaGateway, type: Int32(RTM_NEWROUTE)))
        let via = try #require(Netlink.parseRoute(viaBody))
        // The source the kernel chose (`RTA_PREFSRC`) is read too: the source rule judges it.
        #expect(via.0 == RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 4, gateway: "192.0.2.1",
                                   source: "192.0.2.2"))
    }

    @Test("a link message: name, index, flags, operstate and type")
    @LoopActor func loopbackLink() throws {
        let body = try #require(Self.body(Self.loopback, type: Int32(RTM_NEWLINK)))
        let netlink = try Netlink()
        let link = try #require(netlink.parseLink(body))
        #expect(link.index == 1)
        #expect(link.name == "lo")
        #expect(link.isUp && link.hasCarrier && link.operState == .unknown)
        #expect(link.kernelType == .loopback && !link.isTunnel)
        #expect(link.isUsable)
    }

    // ip -6 route get fibmatch 2001:4860:4860::8888 with "default via 2001:db8:1::1 dev a0 expires 300":
    // the entry, with RTA_CACHEINFO's rta_expires = 29989 ticks of 10 ms.
    static let expiring = "740000001800000007000000f70900000a000000fe0300010000000008000f00fe00000008000600000400001400050020010db8000100000000000000000001080004000200000024000c0000000000000000002575000000000000000000000000000000000000000000000500140000000000"
    // ip route get fibmatch 8.8.8.8 oif 3 with a multipath default route over 192.0.2.1 dev 2 and
    // 198.51.100.1 dev 3: the entry, both next hops in RTA_MULTIPATH.
    static let multipath = "500000001800000007000000230a000002000000fe0300010000000008000f00fe000000080006006400000024000900100000000200000008000500c0000201100000000300000008000500c6336401"
    // ip monitor: 192.0.2.1 dev 2 FAILED (RTM_NEWNEIGH).
    static let neighbourFailed = "400000001c00000000000000770a000002000000020000002000000108000100c00002010800040000000000140003000a0000000a0000000a00000001000000"
    // ip monitor: RTM_NEWNETCONF for ignore_routes_with_linkdown on link 3, then for forwarding.
    static let ignoreLinkdown = "240000005000000000000000000000000200000008000100030000000800060001000000"
    static let forwarding = "240000005000000000000000000000000200000008000100030000000800020001000000"

    @Test("an IPv6 routing entry's lifetime, from RTA_CACHEINFO; none on a route without one")
    func lifetime() throws {
        let body = try #require(Self.body(Self.expiring, type: Int32(RTM_NEWROUTE)))
        let route = try #require(Netlink.parseRoute(body)).0
        #expect(route.lifetime == 299_890 && route.gateway == "2001:db8:1::1" && route.interfaceIndex == 2)
        let plain = try #require(Self.body(Self.viaGateway, type: Int32(RTM_NEWROUTE)))
        #expect(try #require(Netlink.parseRoute(plain)).0.lifetime == nil)
    }

    @Test("a multipath entry: every next hop with its own link and gateway")
    func multipathHops() throws {
        let body = try #require(Self.body(Self.multipath, type: Int32(RTM_NEWROUTE)))
        let hops = Netlink.nextHops(Netlink.attributes(body, from: MemoryLayout<rtmsg>.size))
        #expect(hops == [Netlink.NextHop(interfaceIndex: 2, gateway: "192.0.2.1", hasGateway: true),
                         Netlink.NextHop(interfaceIndex: 3, gateway: "198.51.100.1", hasGateway: true)])
    }

    @Test("neighbour and device-configuration events as the classifier's events")
    func events() throws {
        let neighbour = try #require(Self.body(Self.neighbourFailed, type: Int32(RTM_NEWNEIGH)))
        #expect(NetlinkMonitor.event(UInt16(RTM_NEWNEIGH), neighbour) == .neighbour(address: "192.0.2.1", state: .failed))
        #expect(NetlinkMonitor.event(UInt16(RTM_DELNEIGH), neighbour) == .neighbour(address: "192.0.2.1", state: .absent))
        let linkdown = try #require(Self.body(Self.ignoreLinkdown, type: Int32(RTM_NEWNETCONF)))
        #expect(NetlinkMonitor.event(UInt16(RTM_NEWNETCONF), linkdown) == .deviceConfiguration(ignoresLinkdownRoutes: true))
        let forwarding = try #require(Self.body(Self.forwarding, type: Int32(RTM_NEWNETCONF)))
        #expect(NetlinkMonitor.event(UInt16(RTM_NEWNETCONF), forwarding) == .deviceConfiguration(ignoresLinkdownRoutes: false))
        #expect(NetlinkMonitor.event(UInt16(RTM_NEWROUTE), []) == .routing)
        #expect(NetlinkMonitor.event(UInt16(RTM_NEWNEIGH), [1, 2]) == .other, "truncated")
    }

    @Test("truncated and malformed datagrams give what is whole, and never read past the end")
    func truncated() {
        let full = Self.bytes(Self.viaGateway)
        for cut in [0, 1, 15, 16, 17, full.count - 1] {
            let messages = Netlink.messages(in: full[0..<cut])
            #expect(messages.isEmpty, "cut at \(cut)")
        }
        var lying = full
        lying[0] = 0xff  // a length beyond the datagram
        #expect(Netlink.messages(in: lying[...]).isEmpty)
        // Attributes whose length runs past the body stop the parse.
        #expect(Netlink.attributes([8, 0, 1, 0, 1, 2], from: 0).isEmpty)
        #expect(Netlink.attributes([3, 0, 1, 0], from: 0).isEmpty)
    }
}

/// NetworkManager's states and types, mapped to the facts the flags read.
@Suite("NetworkManager mapping")
struct NetworkManagerMappingTests {
    @Test("device types")
    func types() {
        #expect(NetworkManagerBackend.interfaceType(NM_DEVICE_TYPE_WIFI.rawValue) == .wifi)
        #expect(NetworkManagerBackend.interfaceType(NM_DEVICE_TYPE_ETHERNET.rawValue) == .ethernet)
        #expect(NetworkManagerBackend.interfaceType(NM_DEVICE_TYPE_VETH.rawValue) == .ethernet)
        #expect(NetworkManagerBackend.interfaceType(NM_DEVICE_TYPE_MODEM.rawValue) == .wwan)
        #expect(NetworkManagerBackend.interfaceType(NM_DEVICE_TYPE_BT.rawValue) == .bluetooth)
        #expect(NetworkManagerBackend.interfaceType(NM_DEVICE_TYPE_LOOPBACK.rawValue) == .loopback)
        #expect(NetworkManagerBackend.interfaceType(NM_DEVICE_TYPE_WIREGUARD.rawValue) == .other)
    }

    @Test("device states")
    func states() {
        #expect(NetworkManagerBackend.activity(NM_DEVICE_STATE_ACTIVATED.rawValue) == .activated)
        #expect(NetworkManagerBackend.activity(NM_DEVICE_STATE_NEED_AUTH.rawValue) == .needsAuthentication)
        for state in [NM_DEVICE_STATE_PREPARE, NM_DEVICE_STATE_CONFIG, NM_DEVICE_STATE_IP_CONFIG,
                      NM_DEVICE_STATE_IP_CHECK, NM_DEVICE_STATE_SECONDARIES] {
            #expect(NetworkManagerBackend.activity(state.rawValue) == .activating)
        }
        for state in [NM_DEVICE_STATE_UNMANAGED, NM_DEVICE_STATE_UNAVAILABLE, NM_DEVICE_STATE_DISCONNECTED,
                      NM_DEVICE_STATE_DEACTIVATING, NM_DEVICE_STATE_FAILED] {
            #expect(NetworkManagerBackend.activity(state.rawValue) == .idle)
        }
    }

    @Test("connectivity")
    func connectivity() {
        #expect(NetworkManagerBackend.connectivity(NM_CONNECTIVITY_FULL) == .full)
        #expect(NetworkManagerBackend.connectivity(NM_CONNECTIVITY_LIMITED) == .limited)
        #expect(NetworkManagerBackend.connectivity(NM_CONNECTIVITY_PORTAL) == .portal)
        #expect(NetworkManagerBackend.connectivity(NM_CONNECTIVITY_NONE) == .none)
        #expect(NetworkManagerBackend.connectivity(NM_CONNECTIVITY_UNKNOWN) == .unknown)
    }
}
