/// How a TCP connection of some program on the machine ended, as far as the way out is
/// concerned: whether anything ever came back from its destination (a SYN-ACK, a reset, data).
/// Learnt from the kernel when the socket is destroyed; which program, user or port it was
/// is not kept.
public struct ConnectionOutcome: Sendable, Equatable {
    /// The destination's address, canonical (as `inet_ntop` writes it; an IPv4 address that a
    /// dual-stack socket named as `::ffff:a.b.c.d` in its IPv4 form).
    public let destination: String
    /// The destination (or a host on the way that answers for it with a reset) sent at least
    /// one segment: packets get out and back. A connection refused is answered.
    public let answered: Bool

    public init(destination: String, answered: Bool) {
        self.destination = destination
        self.answered = answered
    }

    /// Whether it says anything of the way out to the internet: not a loopback, link-local or
    /// unspecified destination (those never leave the machine or its link).
    public var isEvidence: Bool {
        !AddressText.isUnspecified(destination) && !AddressText.isLoopback(destination)
            && !AddressText.isLinkLocal(destination)
    }
}

/// When the connections programs make say that nothing gets out, and when they say it does
/// again: the passive half of telling a dead upstream from a working one. It never decides
/// that the network is limited: it says when to ask a check that can (NetworkManager's
/// connectivity check), because a false "offline" costs more than a late one.
///
/// Several distinct destinations unanswered within `window`, with nothing answered since the
/// first of them, is a reason to ask (at most once per `askInterval`); the first connection
/// answered after such an ask is a reason to ask again at once (the network may be back).
/// Counts only: the destinations are kept (at most `destinations` of them, for at most
/// `window`) to count distinct ones, and nothing else of any connection.
public struct UpstreamEvidence: Sendable {
    /// What to do now.
    public enum Ask: Sendable, Equatable {
        /// Connections to `destinations` distinct destinations went unanswered: check now.
        case nothingGetsOut(destinations: Int)
        /// A connection was answered after an ask for failures: check again now.
        case somethingGotOut
    }

    public let destinations: Int
    public let window: Int64
    public let askInterval: Int64
    /// Unanswered destinations, with when each last failed (µs), oldest first.
    private var unanswered: [(destination: String, at: Int64)] = []
    private var lastAsk: Int64?
    /// An ask was made for failures, and nothing has been answered since.
    public private(set) var suspecting = false

    /// Whether an answered connection would change anything: a failure is pending, or an ask
    /// was made. Otherwise the answered ones need not even be heard.
    public var wantsAnswered: Bool { suspecting || !unanswered.isEmpty }

    /// - Parameters: `destinations` distinct ones make a reason; `window` and `askInterval` in
    ///   microseconds.
    public init(destinations: Int, window: Int64, askInterval: Int64) {
        self.destinations = max(1, destinations)
        self.window = window
        self.askInterval = askInterval
    }

    /// Takes one ended connection at `now` (monotonic µs); what to ask, if anything.
    public mutating func record(_ outcome: ConnectionOutcome, at now: Int64) -> Ask? {
        guard outcome.isEvidence else { return nil }
        if outcome.answered {
            unanswered.removeAll()
            guard suspecting else { return nil }
            suspecting = false
            return .somethingGotOut
        }
        unanswered.removeAll { $0.at <= now - window || $0.destination == outcome.destination }
        unanswered.append((outcome.destination, now))
        if unanswered.count > destinations { unanswered.removeFirst(unanswered.count - destinations) }
        guard unanswered.count >= destinations, lastAsk.map({ now - $0 >= askInterval }) ?? true else { return nil }
        lastAsk = now
        suspecting = true
        return .nothingGetsOut(destinations: unanswered.count)
    }
}
