import ReachabilityCore
import ReachabilityLoop

/// Looks host names up for the evaluator: GLib's resolver (`GLibResolver`) in the
/// daemon and the library, a test's own in unit tests (one that answers when the
/// test says), as swift-nio's `Resolver` is a protocol its users can fake.
@LoopActor
public protocol NameResolver: AnyObject {
    /// Resolves `host` (an ASCII name) to its addresses in resolver order, in `owner`'s
    /// turn. `completion` runs on the loop, later (never within this call), unless the
    /// lookup is cancelled first.
    func lookup(_ host: String, owner: UserID, completion: @escaping (Result<[IPAddress], ResolveError>) -> Void)
        -> any NameLookup

    /// How long `host`'s answer `addresses` lives (its DNS TTL, seconds), in `owner`'s turn:
    /// DNS's answer's now, even when it names none of them (the answer moved since), `nil` with
    /// no positive DNS answer (the name came from `/etc/hosts` or another source with no
    /// lifetime). With no `addresses` (the name was not
    /// found), how long that answer lives: DNS's negative TTL (RFC 2308), `nil` without one.
    /// `nil` returned: this resolver knows no lifetimes (the refresh interval and the
    /// network's events alone ask again).
    func lifetime(of host: String, addresses: [IPAddress], owner: UserID,
                  completion: @escaping (UInt32?) -> Void) -> (any NameLookup)?
}

extension NameResolver {
    public func lifetime(of host: String, addresses: [IPAddress], owner: UserID,
                         completion: @escaping (UInt32?) -> Void) -> (any NameLookup)? { nil }
}

/// One lookup in flight.
@LoopActor
public protocol NameLookup: AnyObject {
    /// Drops the lookup: its completion is never called.
    func cancel()
}

/// Why a name has no addresses: the resolver's message ("Name or service not known").
public struct ResolveError: Error, Hashable, Sendable, CustomStringConvertible {
    public let message: String
    /// The resolver has no answer yet, rather than an answer that the name does not exist:
    /// no name server was reachable, or it failed (SERVFAIL), or none is configured yet
    /// ("Temporary failure in name resolution", GLib's `G_RESOLVER_ERROR_TEMPORARY_FAILURE`).
    /// Asking again later may succeed; the evaluator does (`LookupSchedule`).
    public let isTemporary: Bool
    public var description: String { message }
    public init(message: String, isTemporary: Bool = false) {
        self.message = message
        self.isTemporary = isTemporary
    }
}
