import Synchronization
import Testing
@testable import ReachabilityRuntime
import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop

@Suite("The Path interface's properties, decoded")
struct PathDecodingTests {
    private func entry(_ name: String, _ index: Int32, _ type: String, vpn: Bool, v4: Bool, v6: Bool,
                       _ gateways: [String]) -> DBusValue {
        .structure([.string(name), .int32(index), .string(type), .boolean(vpn), .boolean(v4), .boolean(v6),
                    .array(elementSignature: "s", gateways.map { .string($0) })])
    }

    @Test("every property, as GetAll gives them")
    func all() {
        let properties: [String: DBusValue] = [
            "Interfaces": .array(elementSignature: "(sisbbbas)", [
                entry("tun0", 7, "other", vpn: true, v4: true, v6: false, []),
                entry("wlan0", 3, "wifi", vpn: false, v4: true, v6: true, ["192.0.2.1", "fe80::1"]),
                entry("wwan0", 4, "wwan", vpn: false, v4: false, v6: false, []),
            ]),
            "Flags": .uint32(ReachabilityFlags([.reachable, .transientConnection]).rawValue),
            "DnsConfigured": .boolean(true), "Expensive": .boolean(true), "Constrained": .boolean(false),
            "LinkQuality": .string("moderate"),
        ]
        let state = PathState(properties: properties)
        #expect(state.interfaces == [
            PathInterface(name: "tun0", index: 7, type: .other, isVPN: true, usableIPv4: true),
            PathInterface(name: "wlan0", index: 3, type: .wifi, usableIPv4: true, usableIPv6: true,
                          gateways: ["192.0.2.1", "fe80::1"]),
            PathInterface(name: "wwan0", index: 4, type: .wwan),
        ])
        #expect(state.flags == [.reachable, .transientConnection])
        #expect(state.dnsConfigured && state.isExpensive && !state.isConstrained)
        #expect(state.linkQuality == .moderate)
    }

    @Test("nothing, or the wrong shapes, read as no path")
    func malformed() {
        #expect(PathState(properties: [:]) == .none)
        let wrong: [String: DBusValue] = [
            "Interfaces": .array(elementSignature: "(sis)", [.structure([.string("eth0"), .int32(2), .string("x")])]),
            "Flags": .int32(2), "DnsConfigured": .string("yes"), "LinkQuality": .uint32(3),
        ]
        #expect(PathState(properties: wrong) == .none)
        // A quality this library does not know (a newer daemon's): unknown.
        #expect(PathState(properties: ["LinkQuality": .string("excellent")]).linkQuality == .unknown)
        // An unknown type name is "other", as InterfaceType of a target.
        let odd = entry("ib0", 9, "infiniband", vpn: false, v4: true, v6: false, [])
        #expect(PathState(properties: ["Interfaces": .array(elementSignature: "(sisbbbas)", [odd])]).interfaces.first?.type
                == .other)
    }
}

@Suite("The path feed: one per backend, shared by every monitor")
struct PathFeedTests {
    /// The feed lives on the loop; so do the tests (the feed calls back synchronously).
    init() { LoopThread.start() }

    final class Box: Sendable {
        private let states = Mutex<[PathState]>([])
        var received: [PathState] { states.withLock { $0 } }
        func append(_ state: PathState) { states.withLock { $0.append(state) } }
    }

    @Test("nothing before the first real answer, then the current state to each newcomer, then changes once")
    @LoopActor func publishing() {
        let feed = PathFeed()
        let first = Box()
        feed.add(1) { first.append($0) }
        let state = PathState(flags: [.reachable], dnsConfigured: true)
        feed.publish(state, settled: false)
        #expect(first.received.isEmpty)
        feed.publish(state, settled: true)
        #expect(first.received == [state])
        feed.publish(state, settled: true)
        #expect(first.received.count == 1)
        let second = Box()
        feed.add(2) { second.append($0) }
        #expect(second.received == [state])
        feed.publish(.none, settled: true)
        #expect(first.received == [state, .none] && second.received == [state, .none])
        feed.remove(1)
        feed.remove(2)
        #expect(feed.isEmpty)
    }

    @Test("a first answer equal to the initial state still settles and is delivered")
    @LoopActor func settledNone() {
        let feed = PathFeed()
        let box = Box()
        feed.add(1) { box.append($0) }
        feed.publish(.none, settled: true)
        #expect(box.received == [.none])
    }
}
