/// A Unix user id, as the bus driver reports a caller's (`GetConnectionUnixUser`).
/// Every limit that protects users from each other counts per user: one user can
/// open many connections, but has one uid.
public typealias UserID = UInt32

/// The routing policy's uid rules (`ip rule … uidrange A-B`), and which callers
/// they route alike.
///
/// The kernel applies a lookup's uid (`RTA_UID`) to these rules only: two users
/// that fall in the same ranges get the same answer for every destination. So an
/// answer is evaluated once per *answer class* (the set of ranges a uid falls in),
/// not once per user, and with no uid rule at all there is one class and one
/// evaluation per target, as without uids.
public struct UIDRules: Sendable, Hashable {
    /// The ranges of the rules that have one, in rule order (duplicates kept: each is a rule).
    public var ranges: [ClosedRange<UInt32>]

    public init(ranges: [ClosedRange<UInt32>] = []) {
        self.ranges = ranges
    }

    /// No rule selects by uid: every caller gets the same answer.
    public var isEmpty: Bool { ranges.isEmpty }

    /// The answer class of `uid`: the indexes of the ranges that contain it.
    /// Equal classes, equal answers.
    public func answerClass(of uid: UserID) -> AnswerClass {
        AnswerClass(ranges: ranges.indices.filter { ranges[$0].contains(uid) })
    }
}

/// Callers whose lookups the uid rules route alike (`UIDRules.answerClass(of:)`).
public struct AnswerClass: Sendable, Hashable {
    /// The indexes of the uid rules whose range holds these callers' uids.
    public var ranges: [Int]

    public init(ranges: [Int] = []) {
        self.ranges = ranges
    }

    /// The class of callers no uid rule names (root, without uid rules everybody).
    public static let unnamed = AnswerClass()
}
