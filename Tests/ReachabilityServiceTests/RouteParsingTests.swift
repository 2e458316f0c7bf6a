import Testing
@testable import ReachabilityPlatform
import ReachabilityCore

/// An `RTM_NEWROUTE` body: `struct rtmsg` (12 bytes) and attributes.
private func routeMessage(family: UInt8, type: UInt8 = 1, attributes: [(UInt16, [UInt8])]) -> [UInt8] {
    // rtm_family, dst_len, src_len, tos, table (254: main), protocol, scope, type, flags (u32)
    var body: [UInt8] = [family, family == 2 ? 32 : 128, 0, 0, 254, 4, 0, type, 0, 0, 0, 0]
    for (kind, payload) in attributes { body += Netlink.attribute(kind, payload) }
    return body
}

private func le32(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.littleEndian) { Array($0) } }

// linux/rtnetlink.h
private let rtaOIF: UInt16 = 4, rtaGateway: UInt16 = 5, rtaPriority: UInt16 = 6, rtaMultipath: UInt16 = 9
private let rtaTable: UInt16 = 15, rtaVia: UInt16 = 18

@Suite("Route messages parsed: the gateway and metric of the Path interface")
struct RouteParsingTests {
    @Test("RTA_GATEWAY and RTA_PRIORITY of an IPv4 route")
    func ipv4Gateway() throws {
        let body = routeMessage(family: 2, attributes: [
            (rtaTable, le32(254)), (rtaPriority, le32(100)), (rtaGateway, [192, 0, 2, 1]), (rtaOIF, le32(3)),
        ])
        let (route, _, table, metric) = try #require(Netlink.parseRoute(body))
        #expect(route == RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 3, gateway: "192.0.2.1",
                                   metric: 100))
        #expect(table == 254 && metric == 100)
    }

    @Test("an on-link route: no gateway, metric 0 when the kernel gives none")
    func onLink() throws {
        let (route, _, _, _) = try #require(Netlink.parseRoute(routeMessage(family: 2, attributes: [(rtaOIF, le32(5))])))
        #expect(route.gateway == nil && !route.hasGateway && route.metric == 0 && route.interfaceIndex == 5)
    }

    @Test("an IPv6 gateway, canonical text")
    func ipv6Gateway() throws {
        let gateway: [UInt8] = [0x20, 0x01, 0x0d, 0xb8, 0, 1] + [UInt8](repeating: 0, count: 9) + [1]
        let body = routeMessage(family: 10, attributes: [(rtaGateway, gateway), (rtaOIF, le32(2)), (rtaPriority, le32(1024))])
        let (route, _, _, _) = try #require(Netlink.parseRoute(body))
        #expect(route.gateway == "2001:db8:1::1" && route.metric == 1024)
    }

    @Test("RTA_VIA: an IPv6 next hop of an IPv4 route")
    func via() throws {
        let via: [UInt8] = [10, 0] + [0xfe, 0x80] + [UInt8](repeating: 0, count: 13) + [1]  // AF_INET6, fe80::1
        let (route, _, _, _) = try #require(Netlink.parseRoute(routeMessage(family: 2, attributes: [
            (rtaVia, via), (rtaOIF, le32(2)),
        ])))
        #expect(route.gateway == "fe80::1" && route.hasGateway)
    }

    @Test("a multipath route: the first next hop's link and gateway")
    func multipath() throws {
        // struct rtnexthop { u16 len; u8 flags; u8 hops; i32 ifindex; } + RTA_GATEWAY
        let hop1 = [UInt8](le32(16).prefix(2)) + [0, 0] + le32(7) + Netlink.attribute(rtaGateway, [198, 51, 100, 1])
        let hop2 = [UInt8](le32(16).prefix(2)) + [0, 0] + le32(8) + Netlink.attribute(rtaGateway, [192, 0, 2, 1])
        let (route, _, _, _) = try #require(Netlink.parseRoute(routeMessage(family: 2, attributes: [
            (rtaMultipath, hop1 + hop2), (rtaPriority, le32(50)),
        ])))
        #expect(route == RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 7, gateway: "198.51.100.1",
                                   metric: 50))
    }

    @Test("a blackhole route: unusable")
    func blackhole() throws {
        let (route, _, _, _) = try #require(Netlink.parseRoute(routeMessage(family: 2, type: 6, attributes: [])))
        #expect(route.kind == .unusable)
    }
}
