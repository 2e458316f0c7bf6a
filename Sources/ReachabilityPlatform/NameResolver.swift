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
    /// Asking again later may succeed; the evaluator does (`LookupRetries`).
    public let isTemporary: Bool
    public var description: String { message }
    public init(message: String, isTemporary: Bool = false) {
        self.message = message
        self.isTemporary = isTemporary
    }
}
