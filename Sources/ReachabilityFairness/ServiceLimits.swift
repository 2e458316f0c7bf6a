import ReachabilityCore

/// A span of time in microseconds, the unit of the loop's clock (`MonotonicClock`): every
/// duration among the limits (`Limits`, `ServiceLimits`) is one.
public typealias Microseconds = Int64

/// Every bound of the service's own work, in one value: what callers may make it evaluate and
/// look up, how much it keeps, and how long it waits for what. The bus connection's flow and
/// fairness are `Limits`'; the targets a caller may watch are the daemon's options. Counts are
/// in what they count (named in each comment), sizes in bytes, durations in `Microseconds`.
/// What each bounds and why it has this value is told in docs/hardening.md, "The service's own
/// limits" (a test holds that table to this type).
public struct ServiceLimits: Sendable, Equatable {
    // MARK: What callers may ask (`Query`, `Refresh`)

    /// `Query` lookups of unwatched names one user may have in flight (lookups).
    public var queriesPerUser = 64
    /// `Query` lookups of unwatched names all users together may have in flight (lookups).
    public var queries = 1024
    /// Lookups of names a caller chose (`Query` of an unwatched name, `Refresh` of a host) one
    /// user may make at once before the rate applies (lookups).
    public var lookupsOnRequestBurst = 64
    /// Lookups of names a caller chose one user may make a second after its burst (lookups).
    public var lookupsOnRequestPerSecond = 16
    /// `Refresh` calls of one user that may wait for one host's lookup (calls).
    public var waitingRefreshesPerUser = 16
    /// A `Refresh` within this long of the last one uses the facts that one read.
    public var refreshJoinWindow: Microseconds = 100_000

    // MARK: Looking names up (`GLibResolver`, `LookupSchedule`)

    /// Lookups running at once, fewer than GIO's pool has threads (lookups).
    public var lookupsInFlight = 8
    /// Lookups of one user running at once (lookups).
    public var lookupsInFlightPerUser = 4
    /// Lookups owed within this long after the schedule's timer are made when it fires.
    public var lookupCoalescing: Microseconds = 100_000

    // MARK: What the service keeps

    /// Routes kept between two network changes (routes).
    public var routeCache = 32_768
    /// A route's lifetime is taken to have ended this early (the kernel counts in ticks of up to
    /// 10 ms and rounds down).
    public var routeExpirySlack: Microseconds = 20_000
    /// Reply bodies kept for calls that repeat (`ReplyCache`, bodies).
    public var replyCache = 64
    /// The largest reply body kept (bytes, about: the marshalled size).
    public var largestKeptReply = 4096
    /// Target objects nobody holds removed in one turn of the loop (objects).
    public var removalBatch = 128
    /// The rtnetlink socket's receive buffer asked for (bytes).
    public var netlinkReceiveBuffer = 4 * 1024 * 1024

    // MARK: A dead upstream (`UpstreamEvidence`)
    /// Distinct destinations whose TCP connections went unanswered, with none answered, that
    /// make the service ask NetworkManager to check its connectivity (destinations).
    public var unansweredDestinations = 3
    /// How long an unanswered connection counts towards that.
    public var unansweredWindow: Microseconds = 10_000_000
    /// The shortest time between two checks asked for unanswered connections.
    public var upstreamCheckInterval: Microseconds = 10_000_000
    // MARK: Starting

    /// How long the first evaluation is waited for before the bus name is requested with what
    /// is known then.
    public var readyBound: Microseconds = 5_000_000

    public init() {}

    /// The bounds this service runs with.
    public static let standard = ServiceLimits()
}
