import ReachabilityCore
import Testing

@Suite("When an SCNetworkReachability reference calls back (configd's rule)")
struct CalloutsTests {
    /// Which of `answers` call back, for a reference scheduled as a name or an address.
    private func callbacks(name: Bool, _ answers: [ReachabilityFlags], callouts: inout ReachabilityCallouts) -> [Bool] {
        callouts.scheduled(isName: name)
        return answers.map { callouts.received($0) }
    }

    @Test("a name owes one callback once scheduled, even for an unchanged answer; then changes only")
    func name() {
        var callouts = ReachabilityCallouts()
        let heard = callbacks(name: true, [[.reachable], [.reachable], [], [], [.reachable, .isWWAN]], callouts: &callouts)
        #expect(heard == [true, false, true, false, true])
    }

    @Test("an address owes nothing: its first answer is the baseline, a change calls back")
    func address() {
        var callouts = ReachabilityCallouts()
        #expect(callbacks(name: false, [[.reachable, .isDirect], [.reachable, .isDirect], []], callouts: &callouts)
                == [false, false, true])
    }

    @Test("GetFlags while scheduled pays the name's debt: later callbacks are for changes")
    func readSettles() {
        var callouts = ReachabilityCallouts()
        callouts.scheduled(isName: true)
        callouts.read([.reachable])
        #expect(callouts.flags == [.reachable])
        let heard = [[.reachable], []].map { callouts.received($0) }
        #expect(heard == [false, true])
    }

    @Test("unscheduling forgets; scheduling again owes the name's callback again")
    func again() {
        var callouts = ReachabilityCallouts()
        #expect(callbacks(name: true, [[.reachable]], callouts: &callouts) == [true])
        callouts.unscheduled()
        #expect(callouts.flags == nil)
        #expect(callbacks(name: true, [[.reachable]], callouts: &callouts) == [true])
    }
}
