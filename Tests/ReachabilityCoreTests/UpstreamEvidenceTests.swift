import ReachabilityCore
import Testing

@Suite("When ended connections say that nothing gets out (UpstreamEvidence)")
struct UpstreamEvidenceTests {
    private static let second: Int64 = 1_000_000

    private func evidence() -> UpstreamEvidence {
        UpstreamEvidence(destinations: 3, window: 10 * Self.second, askInterval: 10 * Self.second)
    }

    private func failed(_ address: String) -> ConnectionOutcome { .init(destination: address, answered: false) }
    private func answered(_ address: String) -> ConnectionOutcome { .init(destination: address, answered: true) }

    @Test("three distinct destinations unanswered within the window ask once")
    func threeDestinations() {
        var upstream = evidence()
        #expect(upstream.record(failed("203.0.113.1"), at: 0) == nil)
        #expect(upstream.record(failed("203.0.113.1"), at: 1 * Self.second) == nil, "the same destination again")
        #expect(upstream.record(failed("2001:db8::2"), at: 2 * Self.second) == nil)
        #expect(upstream.record(failed("198.51.100.3"), at: 3 * Self.second) == .nothingGetsOut(destinations: 3))
        #expect(upstream.suspecting)
        #expect(upstream.record(failed("198.51.100.4"), at: 4 * Self.second) == nil, "within the ask interval")
        #expect(upstream.record(failed("198.51.100.5"), at: 9 * Self.second) == nil)
        #expect(upstream.record(failed("198.51.100.6"), at: 13 * Self.second) == .nothingGetsOut(destinations: 3),
                "the interval has passed, and three failures are within the window")
    }

    @Test("failures further apart than the window do not add up")
    func window() {
        var upstream = evidence()
        #expect(upstream.record(failed("203.0.113.1"), at: 0) == nil)
        #expect(upstream.record(failed("203.0.113.2"), at: 6 * Self.second) == nil)
        #expect(upstream.record(failed("203.0.113.3"), at: 11 * Self.second) == nil, "the first has expired")
        #expect(upstream.record(failed("203.0.113.4"), at: 12 * Self.second) == .nothingGetsOut(destinations: 3))
    }

    @Test("an answered connection clears the failures, and after an ask, asks again once")
    func answeredConnection() {
        var upstream = evidence()
        _ = upstream.record(failed("203.0.113.1"), at: 0)
        _ = upstream.record(failed("203.0.113.2"), at: 1)
        #expect(upstream.record(answered("192.0.2.80"), at: 2) == nil, "no ask was made: nothing to take back")
        #expect(upstream.record(failed("203.0.113.3"), at: 3) == nil, "the earlier failures no longer count")
        _ = upstream.record(failed("203.0.113.4"), at: 4)
        #expect(upstream.record(failed("203.0.113.5"), at: 5) == .nothingGetsOut(destinations: 3))
        #expect(upstream.record(answered("192.0.2.80"), at: 6) == .somethingGotOut)
        #expect(!upstream.suspecting)
        #expect(upstream.record(answered("192.0.2.80"), at: 7) == nil, "once")
    }

    @Test("answered connections are wanted only while a failure is pending or an ask was made")
    func wantsAnswered() {
        var upstream = evidence()
        #expect(!upstream.wantsAnswered)
        _ = upstream.record(failed("203.0.113.1"), at: 0)
        #expect(upstream.wantsAnswered)
        _ = upstream.record(answered("192.0.2.80"), at: 1)
        #expect(!upstream.wantsAnswered)
        for (index, address) in ["203.0.113.1", "203.0.113.2", "203.0.113.3"].enumerated() {
            _ = upstream.record(failed(address), at: Int64(2 + index))
        }
        #expect(upstream.wantsAnswered && upstream.suspecting)
        _ = upstream.record(answered("192.0.2.80"), at: 10)
        #expect(!upstream.wantsAnswered)
    }

    @Test("loopback, link-local and unspecified destinations are no evidence of the way out")
    func localDestinations() {
        var upstream = evidence()
        for (index, address) in ["127.0.0.1", "::1", "169.254.1.1", "fe80::1", "0.0.0.0", "::"].enumerated() {
            #expect(upstream.record(failed(address), at: Int64(index)) == nil, "\(address)")
        }
        #expect(!ConnectionOutcome(destination: "127.0.0.1", answered: false).isEvidence)
        #expect(ConnectionOutcome(destination: "203.0.113.1", answered: false).isEvidence)
    }

    @Test("ten thousand failing destinations ask once within the interval")
    func bounded() {
        var upstream = evidence()
        var asks = 0
        for index in 0..<10_000 {
            if upstream.record(failed("10.\(index / 65536).\(index / 256 % 256).\(index % 256)"), at: Int64(index)) != nil {
                asks += 1
            }
        }
        #expect(asks == 1, "one ask within the interval")
    }
}
