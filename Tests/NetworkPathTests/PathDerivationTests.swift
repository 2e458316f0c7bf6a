import Testing
@testable import NetworkPath
import ReachabilityCore

/// Lab-like interfaces: the names and gateways the integration tests use.
private func link(_ name: String, _ index: Int32, _ type: ReachabilityCore.InterfaceType, vpn: Bool = false,
                  v4: Bool = true, v6: Bool = false, gateways: [String] = []) -> PathInterface {
    PathInterface(name: name, index: index, type: type, isVPN: vpn, usableIPv4: v4, usableIPv6: v6,
                  gateways: gateways)
}

private let online: ReachabilityFlags = [.reachable]
private let wired = link("eth0", 2, .ethernet, gateways: ["192.0.2.1"])
private let wifi = link("wlan0", 3, .wifi, v6: true, gateways: ["198.51.100.1", "fe80::1"])
private let modem = link("wwan0", 4, .wwan, gateways: [])
private let tunnel = link("tun0", 5, .other, vpn: true)

private func path(_ interfaces: [PathInterface], flags: ReachabilityFlags = online, dns: Bool = true,
                  expensive: Bool = false, constrained: Bool = false, _ requirement: PathRequirement = .any) -> NWPath {
    NWPath(PathState(interfaces: interfaces, flags: flags, dnsConfigured: dns, isExpensive: expensive,
                     isConstrained: constrained), requirement: requirement)
}

@Suite("NWPath from the Path facts")
struct PathDerivationTests {
    @Test("no interface, nothing known: unsatisfied, no facts")
    func none() {
        let p = NWPath(.none, requirement: .any)
        #expect(p.status == .unsatisfied)
        #expect(p.unsatisfiedReason == .notAvailable)
        #expect(p.availableInterfaces.isEmpty && p.gateways.isEmpty)
        #expect(!p.supportsIPv4 && !p.supportsIPv6 && !p.supportsDNS && !p.isExpensive && !p.isConstrained)
        for type in [NWInterface.InterfaceType.wifi, .cellular, .wiredEthernet, .loopback, .other] {
            #expect(!p.usesInterfaceType(type))
        }
        #expect(p == .unsatisfied)
    }

    @Test("one wired uplink: satisfied over it, its gateway, IPv4 only")
    func wiredUplink() {
        let p = path([wired])
        #expect(p.status == .satisfied)
        #expect(p.availableInterfaces == [NWInterface(name: "eth0", index: 2, type: .wiredEthernet)])
        #expect(p.usesInterfaceType(.wiredEthernet))
        #expect(!p.usesInterfaceType(.wifi) && !p.usesInterfaceType(.other))
        #expect(p.supportsIPv4 && !p.supportsIPv6 && p.supportsDNS)
        #expect(p.gateways == [.hostPort(host: .ipv4(IPv4Address("192.0.2.1")!), port: 0)])
    }

    @Test("types map to Apple's: wifi, wwan → cellular, ethernet → wiredEthernet, the rest other")
    func typeMapping() {
        #expect(NWInterface.InterfaceType(.wifi) == .wifi)
        #expect(NWInterface.InterfaceType(.wwan) == .cellular)
        #expect(NWInterface.InterfaceType(.ethernet) == .wiredEthernet)
        #expect(NWInterface.InterfaceType(.bluetooth) == .other)
        #expect(NWInterface.InterfaceType(.other) == .other)
        #expect(NWInterface.InterfaceType(.loopback) == .loopback)
    }

    @Test("interfaces without a usable route are not available; carrier loss leaves the other uplink")
    func unusableLeftOut() {
        var down = wired
        down.usableIPv4 = false
        let p = path([wifi, down])
        #expect(p.availableInterfaces.map(\.name) == ["wlan0"])
        #expect(path([down]).status == .unsatisfied)
        #expect(path([down]).availableInterfaces.isEmpty)
    }

    @Test("two uplinks: the preferred first, both gateways in order, the first one's type used")
    func secondUplink() {
        let p = path([wired, wifi])
        #expect(p.availableInterfaces.map(\.name) == ["eth0", "wlan0"])
        #expect(p.usesInterfaceType(.wiredEthernet) && !p.usesInterfaceType(.wifi))
        #expect(p.supportsIPv4 && p.supportsIPv6)
        #expect(p.gateways.map(\.debugDescription) == ["192.0.2.1:0", "198.51.100.1:0", "[fe80::1]:0"])
    }

    @Test("a link-local IPv6 gateway is scoped to its interface")
    func linkLocalGateway() {
        let p = path([wifi])
        guard case .hostPort(.ipv6(let address), let port)? = p.gateways.last else {
            Issue.record("no IPv6 gateway: \(p.gateways)")
            return
        }
        #expect(port == .any)
        #expect(address.interface?.name == "wlan0" && address.interface?.index == 3)
        #expect(address.isLinkLocal)
    }

    @Test("a required type: satisfied only by a usable interface of that type, which it then uses")
    func required() {
        let wifiOnly = PathRequirement(required: .wifi)
        let p = path([wired, wifi], wifiOnly)
        #expect(p.status == .satisfied)
        #expect(p.availableInterfaces.map(\.name) == ["wlan0"])
        #expect(p.usesInterfaceType(.wifi) && !p.usesInterfaceType(.wiredEthernet))
        #expect(p.gateways.map(\.debugDescription) == ["198.51.100.1:0", "[fe80::1]:0"])
        #expect(path([wired], wifiOnly).status == .unsatisfied)
        var noRoute = wifi
        (noRoute.usableIPv4, noRoute.usableIPv6) = (false, false)
        #expect(path([wired, noRoute], wifiOnly).status == .unsatisfied)
        #expect(path([wired, noRoute], wifiOnly).availableInterfaces.isEmpty)
    }

    @Test("prohibited types: left out of the interfaces and never satisfy")
    func prohibited() {
        let noWired = PathRequirement(prohibited: [.wiredEthernet])
        let p = path([wired, wifi], noWired)
        #expect(p.status == .satisfied)
        #expect(p.availableInterfaces.map(\.name) == ["wlan0"])
        #expect(p.usesInterfaceType(.wifi) && !p.usesInterfaceType(.wiredEthernet))
        #expect(path([wired], noWired).status == .unsatisfied)
        #expect(path([wired], PathRequirement(prohibited: [.wifi, .cellular])).status == .satisfied)
    }

    @Test("a VPN: the path uses the tunnel and its underlay's type")
    func vpn() {
        let p = path([tunnel, wifi])
        #expect(p.status == .satisfied)
        #expect(p.availableInterfaces.map(\.name) == ["tun0", "wlan0"])
        #expect(p.usesInterfaceType(.other) && p.usesInterfaceType(.wifi))
        #expect(!p.usesInterfaceType(.wiredEthernet))
        // Over a modem, the tunnel is expensive too.
        #expect(path([tunnel, modem]).isExpensive)
        #expect(path([tunnel, modem]).usesInterfaceType(.cellular))
    }

    @Test("a VPN over a prohibited type is not used; one over an allowed type is")
    func vpnUnderlayProhibited() {
        let noCellular = PathRequirement(prohibited: [.cellular])
        let overModem = path([tunnel, modem, wired], noCellular)
        #expect(overModem.availableInterfaces.map(\.name) == ["eth0"])
        #expect(!overModem.usesInterfaceType(.other))
        let overWired = path([tunnel, wired], noCellular)
        #expect(overWired.availableInterfaces.map(\.name) == ["tun0", "eth0"])
        // Requiring wifi with a tunnel on top: the path is Wi-Fi itself.
        let wifiOnly = path([tunnel, wifi], PathRequirement(required: .wifi))
        #expect(wifiOnly.availableInterfaces.map(\.name) == ["wlan0"])
        #expect(wifiOnly.usesInterfaceType(.wifi) && !wifiOnly.usesInterfaceType(.other))
    }

    @Test("IPv6 only: supportsIPv6 without IPv4")
    func ipv6Only() {
        let v6 = link("eth0", 2, .ethernet, v4: false, v6: true, gateways: ["fe80::1"])
        let p = path([v6])
        #expect(p.status == .satisfied)
        #expect(!p.supportsIPv4 && p.supportsIPv6)
    }

    @Test("the flags speak for the preferred interface: a portal or no connectivity is unsatisfied")
    func flagsForPreferred() {
        #expect(path([wired], flags: [.reachable, .connectionRequired, .interventionRequired]).status == .unsatisfied)
        #expect(path([wired], flags: []).status == .unsatisfied)
        #expect(path([wired], flags: [.reachable, .connectionRequired, .connectionOnTraffic]).status
                == .requiresConnection)
        // A monitor that must use another interface judges it by its route.
        #expect(path([wired, wifi], flags: [], PathRequirement(required: .wifi)).status == .satisfied)
    }

    @Test("no usable interface but a connection on demand: requires a connection (no requirement only)")
    func onDemand() {
        let flags: ReachabilityFlags = [.reachable, .connectionRequired, .connectionOnDemand]
        #expect(path([], flags: flags).status == .requiresConnection)
        #expect(path([], flags: flags, PathRequirement(required: .wifi)).status == .unsatisfied)
        #expect(path([], flags: [.connectionRequired, .interventionRequired]).status == .unsatisfied)
    }

    @Test("flags alone in Apple's terms")
    func statusFromFlags() {
        #expect(NWPath.Status([.reachable]) == .satisfied)
        #expect(NWPath.Status([.reachable, .isWWAN, .transientConnection]) == .satisfied)
        #expect(NWPath.Status([.reachable, .connectionRequired]) == .requiresConnection)
        #expect(NWPath.Status([.connectionRequired, .interventionRequired]) == .unsatisfied)
        #expect(NWPath.Status([]) == .unsatisfied)
    }

    @Test("cost: metered preferred interface is expensive, user-metered is constrained, a modem is expensive")
    func cost() {
        #expect(path([wired], expensive: true).isExpensive)
        #expect(!path([wired], expensive: true).isConstrained)
        #expect(path([wired], expensive: true, constrained: true).isConstrained)
        #expect(path([modem]).isExpensive)
        // Known for the preferred interface only: another one is not expensive by its facts.
        let other = path([wired, wifi], expensive: true, constrained: true, PathRequirement(required: .wifi))
        #expect(!other.isExpensive && !other.isConstrained)
        // An unsatisfied path costs nothing.
        #expect(!path([], expensive: true).isExpensive)
    }

    @Test("link quality: the preferred interface's, Apple's cases; unknown through another interface or none")
    func linkQuality() {
        func quality(_ interfaces: [PathInterface], _ quality: ReachabilityCore.LinkQuality,
                     flags: ReachabilityFlags = online, _ requirement: PathRequirement = .any) -> NWPath.LinkQuality {
            NWPath(PathState(interfaces: interfaces, flags: flags, linkQuality: quality), requirement: requirement)
                .linkQuality
        }
        #expect(quality([wifi], .minimal) == .minimal)
        #expect(quality([wifi], .moderate) == .moderate)
        #expect(quality([wifi], .good) == .good)
        #expect(quality([wifi], .unknown) == .unknown)
        // The facts carry the preferred interface's quality only.
        #expect(quality([wired, wifi], .good, PathRequirement(required: .wifi)) == .unknown)
        #expect(quality([wired, wifi], .good, PathRequirement(required: .wiredEthernet)) == .good)
        // No path: nothing measured (a captive portal's path is unsatisfied too).
        #expect(quality([], .good) == .unknown)
        #expect(quality([wired], .good, flags: [.connectionRequired, .interventionRequired]) == .unknown)
        #expect(NWPath.unsatisfied.linkQuality == .unknown)
        // A new quality is a new path: a monitor reports it.
        #expect(NWPath(PathState(interfaces: [wifi], flags: online, linkQuality: .good), requirement: .any)
                != NWPath(PathState(interfaces: [wifi], flags: online, linkQuality: .minimal), requirement: .any))
    }

    @Test("DNS is supported when configured and the path is satisfied")
    func dns() {
        #expect(path([wired], dns: true).supportsDNS)
        #expect(!path([wired], dns: false).supportsDNS)
        #expect(!path([], dns: true).supportsDNS)
    }

    @Test("paths are equal when every observable fact is; a new gateway or cost makes a new path")
    func equality() {
        #expect(path([wired]) == path([wired]))
        #expect(path([wired]) != path([wired], expensive: true))
        var moved = wired
        moved.gateways = ["192.0.2.254"]
        #expect(path([wired]) != path([moved]))
        #expect(path([wired, wifi]) != path([wifi, wired]))
        // Facts no monitor can see (flags beyond the status, a prohibited interface) do not matter.
        #expect(path([wired], flags: [.reachable, .isDirect]) == path([wired]))
        let noWifi = PathRequirement(prohibited: [.wifi])
        #expect(path([wired, wifi], noWifi) == path([wired], noWifi))
    }

    @Test("debugDescription names the status, interfaces and facts")
    func debugDescription() {
        #expect(path([wired, wifi], expensive: true).debugDescription
                == "satisfied, interface: eth0,wlan0, ipv4, ipv6, dns, expensive")
        #expect(NWPath.unsatisfied.debugDescription == "unsatisfied")
        #expect("\(NWPath.Status.satisfied)" == "satisfied")
    }
}

@Suite("NWPath's reasons")
struct PathReasonTests {
    @Test("satisfied: no reason; the system's word when nothing is usable")
    func systemReason() {
        #expect(path([wired]).reason == "" && path([wired]).unsatisfiedReason == .notAvailable)
        let down = NWPath(PathState(interfaces: [link("eth0", 2, .ethernet, v4: false)], reason: .noCarrier),
                          requirement: .any)
        #expect(down.status == .unsatisfied && down.reason == "no-carrier" && down.unsatisfiedReason == .notAvailable)
        #expect(!down.isUltraConstrained && !path([wired]).isUltraConstrained)
    }

    @Test("the monitor's own requirement leaves out the only interfaces: interface-prohibited, denied in Apple's terms",
          arguments: [
            (wifi, PathRequirement(prohibited: [.wifi]), NWPath.UnsatisfiedReason.wifiDenied),
            (modem, PathRequirement(required: .wifi), .cellularDenied),
            (wired, PathRequirement(required: .wifi), .notAvailable),
          ])
    func prohibited(interface: PathInterface, requirement: PathRequirement, denied: NWPath.UnsatisfiedReason) {
        let p = path([interface], requirement)
        #expect(p.status == .unsatisfied && p.reason == "interface-prohibited" && p.unsatisfiedReason == denied)
        // Whether the interface can carry traffic or not: the monitor's reason stays (no new path on a flap).
        var unusable = interface
        unusable.usableIPv4 = false
        unusable.usableIPv6 = false
        #expect(path([unusable], flags: [], requirement) == p)
    }
}
