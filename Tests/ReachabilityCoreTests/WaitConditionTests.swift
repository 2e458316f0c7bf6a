import ReachabilityCore
import Testing

@Suite("What reachctl wait waits for, and the debounce of the units that follow the network")
struct WaitConditionTests {
    static let online = TargetState(flags: [.reachable], interface: "eth0", interfaceType: .ethernet,
                                    connectivity: .full, reachableIPv4: true)

    @Test("unknown and not reachable are unmet, with the target's reason and detail")
    func notReachable() {
        let condition = WaitCondition()
        #expect(condition.unmet(by: .unknown) == .unknown)
        let offline = TargetState(flags: [], reason: .noCarrier, error: "no carrier on eth0")
        #expect(condition.unmet(by: offline) == .notReachable(.noCarrier, "no carrier on eth0"))
        #expect(condition.unmet(by: offline)?.description == "no-carrier (no carrier on eth0)")
        #expect(condition.isMet(by: Self.online))
    }

    @Test("-4, -6 (both: both), --unmetered and --full each ask for more than a route")
    func options() {
        #expect(WaitCondition(ipv4: true).isMet(by: Self.online))
        #expect(WaitCondition(ipv6: true).unmet(by: Self.online) == .family("IPv6"))
        #expect(WaitCondition(ipv4: true, ipv6: true).unmet(by: Self.online) == .family("IPv6"))
        var metered = Self.online
        metered.isMetered = true
        #expect(WaitCondition(unmetered: true).unmet(by: metered) == .metered)
        #expect(WaitCondition().isMet(by: metered))
        var limited = Self.online
        limited.connectivity = .limited
        #expect(WaitCondition(fullConnectivity: true).unmet(by: limited) == .connectivity(.limited))
        #expect(WaitCondition.onlineUnmetered.isMet(by: Self.online))
    }

    @Test("every target, or with --any one of them; no answer yet counts as unmet")
    func allOrAny() {
        let condition = WaitCondition()
        let offline = TargetState(flags: [], reason: .noRoute)
        #expect(condition.isMet(by: [Self.online, Self.online], any: false))
        #expect(!condition.isMet(by: [Self.online, offline], any: false))
        #expect(condition.isMet(by: [nil, Self.online], any: true))
        #expect(!condition.isMet(by: [nil, nil], any: true))
        #expect(!condition.isMet(by: [], any: true))
    }

    @Test("started at once, stopped only after the condition failed for the whole delay")
    func debounce() {
        var unit = UnitDebounce(stopDelay: 2_000_000)
        #expect(unit.update(met: false, now: 0) == .none)
        #expect(unit.update(met: true, now: 10) == .start)
        #expect(unit.update(met: true, now: 20) == .none)
        #expect(unit.update(met: false, now: 1_000_000) == .none)
        #expect(unit.deadline == 3_000_000)
        // A blink: back before the delay ran out, nothing stops.
        #expect(unit.update(met: true, now: 2_000_000) == .none)
        #expect(unit.deadline == nil)
        #expect(unit.update(met: false, now: 4_000_000) == .none)
        #expect(unit.update(met: false, now: 5_999_999) == .none)
        #expect(unit.update(met: false, now: 6_000_000) == .stop)
        #expect(!unit.isActive && unit.deadline == nil)
        #expect(unit.update(met: false, now: 7_000_000) == .none)
    }
}
