/// When an `SCNetworkReachability` reference calls its callback: configd's rule
/// (`__SCNetworkReachabilityShouldUpdateClient` and `sentFirstUpdate` in
/// `SCNetworkReachability.c`), as a value. Pure; the SystemConfiguration module
/// keeps one per reference, under its lock.
///
/// - Scheduling a **name** target owes the client one callback, sent with the
///   first answer (the lookup's), whatever it is; an **address** (or the zero
///   address) owes none: its callback runs only when the flags change.
/// - Reading the flags while scheduled (`GetFlags`) pays that debt: the answer
///   was seen, so later callbacks are for changes only.
/// - After that, one callback for each change of the flags, never for an
///   answer equal to the last one.
/// - Unscheduling forgets everything: scheduling again starts over.
public struct ReachabilityCallouts: Sendable, Hashable {
    /// The flags the client last saw or was last told of; `nil` before the first answer.
    public private(set) var flags: ReachabilityFlags?
    /// Whether the callback the scheduling owes has run (configd's `sentFirstUpdate`).
    public private(set) var sentFirstUpdate = true

    public init() {}

    /// The reference was scheduled; `isName` for a name target.
    public mutating func scheduled(isName: Bool) {
        flags = nil
        sentFirstUpdate = !isName
    }

    /// An answer arrived while scheduled: whether the callback runs for it.
    public mutating func received(_ new: ReachabilityFlags) -> Bool {
        defer {
            flags = new
            sentFirstUpdate = true
        }
        guard let flags else { return !sentFirstUpdate }
        return !sentFirstUpdate || flags != new
    }

    /// `GetFlags` answered `answer` while scheduled: the client has seen it.
    public mutating func read(_ answer: ReachabilityFlags) {
        flags = answer
        sentFirstUpdate = true
    }

    /// Unscheduled: nothing is owed and nothing is known.
    public mutating func unscheduled() {
        flags = nil
        sentFirstUpdate = true
    }
}
