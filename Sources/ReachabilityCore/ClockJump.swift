/// Whether a set of the wall clock (a `CLOCK_REALTIME` timerfd with `TFD_TIMER_CANCEL_ON_SET`
/// became readable) was a resume from sleep, when logind is not there to say so. Pure: the
/// platform reads the clocks.
///
/// The kernel sets the wall clock on resume, and so do NTP and `date -s`. Only a sleep moves
/// `CLOCK_BOOTTIME` away from `CLOCK_MONOTONIC` (the monotonic clock stops while suspended, the
/// boot-time clock does not): a resume is a growth of their difference of at least `threshold`.
public struct ClockJump: Sendable, Hashable {
    /// The least time asleep taken as a resume, in nanoseconds (1 s: a suspend and resume take longer).
    public static let threshold: Int64 = 1_000_000_000

    /// `CLOCK_BOOTTIME` − `CLOCK_MONOTONIC` at the last look, in nanoseconds.
    public private(set) var asleep: Int64

    public init(boottime: Int64, monotonic: Int64) {
        asleep = boottime &- monotonic
    }

    /// The clock was set, read now: whether the machine slept since the last look (logind absent).
    /// A set while logind is on the bus is never a resume here: its signal speaks for one.
    public mutating func wasResume(boottime: Int64, monotonic: Int64, logindPresent: Bool) -> Bool {
        let now = boottime &- monotonic
        defer { asleep = now }
        return !logindPresent && now &- asleep >= Self.threshold
    }
}
