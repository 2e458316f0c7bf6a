import Testing
@testable import ReachabilityCore

private func link(_ index: Int32, _ name: String, type: InterfaceType, tunnel: Bool = false,
                  carrier: Bool = true) -> LinkFact {
    LinkFact(index: index, name: name, isUp: true, hasCarrier: carrier, operState: carrier ? .up : .down,
             kernelType: type, isTunnel: tunnel)
}

private func via(_ index: Int32, _ gateway: String = "192.0.2.1", metric: UInt32 = 100) -> RouteFact {
    RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: index, gateway: gateway, metric: metric)
}

/// The path of `links` whose internet route leaves through `preferred`, every link routed.
private func path(_ links: [LinkFact], preferred: Int32, devices: [DeviceFact] = []) -> PathState {
    let facts = NetworkFacts(
        backend: devices.isEmpty ? .kernel : .networkManager,
        devices: Dictionary(uniqueKeysWithValues: devices.map { ($0.interface, $0) }),
        links: Dictionary(uniqueKeysWithValues: links.map { ($0.index, $0) }),
        internetRoutes: [.ipv4: Array(repeating: via(preferred), count: 3)],
        underlayLinks: Set(links.filter { !$0.isTunnel }.map(\.index)))
    let bound = Dictionary(uniqueKeysWithValues: links.map { ($0.index, Engine.BoundRoutes(ipv4: via($0.index))) })
    return Engine.evaluatePaths(facts, bound: bound, dnsConfigured: true)
}

private let eth0 = link(2, "eth0", type: .ethernet)
private let wlan0 = link(3, "wlan0", type: .wifi)
private let wwan0 = link(4, "wwan0", type: .wwan)
private let tun0 = link(5, "tun0", type: .other, tunnel: true)
private let bnep0 = link(6, "bnep0", type: .bluetooth)

private func wifi(signal: UInt8?) -> DeviceFact {
    DeviceFact(interface: "wlan0", type: .wifi, activity: .activated, signal: signal)
}

@Suite("Link quality (LinkQuality, Engine.linkQuality)")
struct LinkQualityTests {
    @Test("signal to quality: nmcli's bars, each boundary on both sides", arguments: [
        (0, LinkQuality.minimal), (5, .minimal), (30, .minimal),
        (31, .moderate), (55, .moderate),
        (56, .good), (80, .good), (100, .good), (255, .good),
    ] as [(UInt8, LinkQuality)])
    func mapping(signal: UInt8, expected: LinkQuality) {
        #expect(LinkQuality(signal: signal) == expected)
    }

    @Test("the thresholds are listed from the best quality down, each lower than the one before")
    func thresholdsOrdered() {
        let starts = LinkQuality.thresholds.map(\.from)
        #expect(starts == starts.sorted(by: >))
        #expect(LinkQuality.thresholds.map(\.quality) == [.good, .moderate])
    }

    @Test("Wi-Fi: its access point's strength; unknown without one (no NetworkManager, no access point)")
    func wifiQuality() {
        #expect(path([wlan0], preferred: 3, devices: [wifi(signal: 20)]).linkQuality == .minimal)
        #expect(path([wlan0], preferred: 3, devices: [wifi(signal: 45)]).linkQuality == .moderate)
        #expect(path([wlan0], preferred: 3, devices: [wifi(signal: 80)]).linkQuality == .good)
        #expect(path([wlan0], preferred: 3, devices: [wifi(signal: nil)]).linkQuality == .unknown)
        #expect(path([wlan0], preferred: 3).linkQuality == .unknown, "the kernel backend knows no signal")
    }

    @Test("a modem: ModemManager's signal quality; unknown while none is known")
    func modemQuality() {
        let modem = DeviceFact(interface: "wwan0", type: .wwan, activity: .activated, signal: 40)
        #expect(path([wwan0], preferred: 4, devices: [modem]).linkQuality == .moderate)
        let silent = DeviceFact(interface: "wwan0", type: .wwan, activity: .activated)
        #expect(path([wwan0], preferred: 4, devices: [silent]).linkQuality == .unknown)
    }

    @Test("wired Ethernet with carrier is good; without carrier there is no path and nothing is known")
    func wired() {
        #expect(path([eth0], preferred: 2).linkQuality == .good)
        #expect(path([link(2, "eth0", type: .ethernet, carrier: false)], preferred: 2).linkQuality == .unknown)
    }

    @Test("a tunnel and Bluetooth have no measurement, whatever carries them")
    func noMeasurement() {
        // The tunnel is preferred (its route is the internet's), over a strong Wi-Fi.
        #expect(path([tun0, wlan0], preferred: 5, devices: [wifi(signal: 90)]).linkQuality == .unknown)
        #expect(path([bnep0], preferred: 6).linkQuality == .unknown)
    }

    @Test("only the preferred interface counts: Ethernet first, a weak Wi-Fi beside it")
    func preferredOnly() {
        let state = path([eth0, wlan0], preferred: 2, devices: [wifi(signal: 10)])
        #expect(state.interfaces.first?.name == "eth0")
        #expect(state.linkQuality == .good)
        let wifiFirst = path([eth0, wlan0], preferred: 3, devices: [wifi(signal: 10)])
        #expect(wifiFirst.interfaces.first?.name == "wlan0")
        #expect(wifiFirst.linkQuality == .minimal)
    }

    @Test("no usable interface: unknown")
    func nothing() {
        #expect(PathState.none.linkQuality == .unknown)
        #expect(Engine.linkQuality(of: nil, device: wifi(signal: 90)) == .unknown)
    }
}
