import ReachabilityCore
import Testing

@Suite struct ClockJumpTests {
    let second: Int64 = 1_000_000_000

    @Test func aSleepIsAResumeAndASetClockIsNot() {
        var jump = ClockJump(boottime: 100 * second, monotonic: 90 * second)
        var resumed: Bool
        // `date -s` or NTP: both clocks ran on together.
        resumed = jump.wasResume(boottime: 110 * second, monotonic: 100 * second, logindPresent: false)
        #expect(!resumed)
        // 30 s asleep: the boot-time clock ran on, the monotonic one stopped.
        resumed = jump.wasResume(boottime: 150 * second, monotonic: 110 * second, logindPresent: false)
        #expect(resumed)
        // The same sleep is not said twice at the next set.
        resumed = jump.wasResume(boottime: 151 * second, monotonic: 111 * second, logindPresent: false)
        #expect(!resumed)
        // Under a second apart: not a sleep.
        resumed = jump.wasResume(boottime: 152 * second + second / 2, monotonic: 112 * second, logindPresent: false)
        #expect(!resumed)
    }

    @Test func logindSpeaksForAResume() {
        var jump = ClockJump(boottime: 100 * second, monotonic: 90 * second)
        var resumed: Bool
        resumed = jump.wasResume(boottime: 200 * second, monotonic: 100 * second, logindPresent: true)
        #expect(!resumed)
        // Its sleep was taken in: not said again once logind is gone.
        resumed = jump.wasResume(boottime: 201 * second, monotonic: 101 * second, logindPresent: false)
        #expect(!resumed)
    }
}
