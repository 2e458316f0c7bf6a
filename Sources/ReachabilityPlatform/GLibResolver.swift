import CGLib
import Logging
import ReachabilityCore
import ReachabilityFairness
import ReachabilityLoop

/// Host-name resolution through GLib's `GResolver`, which answers on the main
/// loop and never blocks it.
///
/// Each lookup runs `getaddrinfo` on one of GLib's worker threads, and nothing
/// can stop it there: a name whose DNS answers never come holds its thread
/// until the system resolver gives up (seconds to a minute). So lookups are
/// charged to a user (the caller who asked, or the first holder of a watched
/// name) until their thread is free again, cancelled or not: at most
/// `maximumInFlight` run at once — fewer than GLib's pool has threads, so
/// GLib never queues them itself — and at most `maximumInFlightPerUser` for
/// one user. The rest wait their turn, round-robin between users. A lookup
/// cancelled while it waits is never started; one cancelled while it runs
/// has its answer dropped.
@LoopActor
public final class GLibResolver: NameResolver {
    public static let maximumInFlight = ServiceLimits.standard.lookupsInFlight
    public static let maximumInFlightPerUser = ServiceLimits.standard.lookupsInFlightPerUser

    /// One lookup; cancelling it drops its completion.
    @LoopActor
    public final class Lookup: NameLookup {
        /// What is asked: the name's addresses (GLib's resolver), or how long its answer lives
        /// (`GLibResolver+Lifetime`).
        enum Work {
            case addresses((Result<[IPAddress], ResolveError>) -> Void)
            case lifetime(addresses: [IPAddress], (UInt32?) -> Void)
        }
        let host: String
        let owner: UserID
        let work: Work
        var isCancelled = false
        weak var resolver: GLibResolver?

        init(host: String, owner: UserID, work: Work) {
            self.host = host
            self.owner = owner
            self.work = work
        }

        /// Stops the lookup: the completion is never called. One not started yet is
        /// never started; one running keeps its owner's slot until its thread is
        /// free (cancelling it in GLib would free the slot, not the thread).
        public func cancel() { isCancelled = true }
    }

    let resolver: UnsafeMutablePointer<GResolver>
    /// Lookups not started yet, per owner in order, served round-robin. Bounded upstream
    /// (by the targets and queries each user may have), so its own limits are loose.
    private var waiting = FairQueue<Lookup>(limits: .init(
        perUserItems: 1 << 20, perUserCost: 1 << 20, totalItems: 1 << 22, totalCost: 1 << 22))
    /// Lookups whose thread is busy, per owner.
    private var running = Quota(perUser: GLibResolver.maximumInFlightPerUser, total: GLibResolver.maximumInFlight)
    public var inFlight: Int { running.inUse }
    /// The most lookups in flight at once since the resolver was last idle.
    public private(set) var peakInFlight = 0

    private let logger: Logger
    /// The hosts file's names: they are not asked a lifetime (`lifetime(of:…)`) unless DNS
    /// is asked before the file (`nameServiceOrder`).
    let hostsFile = StampedFile(path: HostsFile.path, parse: HostsFile.parse)
    /// Whether the name service asks DNS before the hosts file (`HostsFile.asksDNSFirst`).
    let nameServiceOrder = StampedFile(path: HostsFile.nameServicePath) { HostsFile.asksDNSFirst(nsswitch: $0) }

    /// `logger` hears how far each burst of lookups went (at `debug`).
    public init(logger: Logger) {
        resolver = g_resolver_get_default()
        self.logger = logger
    }

    isolated deinit { g_object_unref(resolver) }

    /// Resolves `host` (an ASCII name) to its addresses in resolver order, in `owner`'s turn.
    public func lookup(_ host: String, owner: UserID,
                       completion: @escaping (Result<[IPAddress], ResolveError>) -> Void) -> any NameLookup {
        enqueue(Lookup(host: host, owner: owner, work: .addresses(completion)))
    }

    /// Queues `lookup` in its owner's turn.
    func enqueue(_ lookup: Lookup) -> Lookup {
        lookup.resolver = self
        try? waiting.enqueue(lookup, user: lookup.owner, cost: 1)
        startWaiting()
        return lookup
    }

    /// The number of lookups queued behind the in-flight ones.
    public var queued: Int { waiting.count }

    private func startWaiting() {
        while running.inUse < Self.maximumInFlight {
            let running = self.running
            guard let (_, next) = waiting.next(where: { running.allows($0) }) else { return }
            if !next.isCancelled { start(next) }
        }
    }

    /// Wraps `g_resolver_lookup_by_name_async`.
    private func start(_ lookup: Lookup) {
        _ = running.take(lookup.owner)
        peakInFlight = max(peakInFlight, inFlight)
        Instruments.lookupsInFlight.record(inFlight)
        switch lookup.work {
        case .addresses:
            g_resolver_lookup_by_name_async(resolver, lookup.host, nil, Self.answered,
                                            Unmanaged.passRetained(lookup).toOpaque())
        case .lifetime(let addresses, _):
            startLifetime(lookup, addresses: addresses)
        }
    }

    /// GLib's answer to one lookup, on the loop's context (where the lookup started); it
    /// enters the actor through `LoopActor.assumeIsolated`, which checks that thread.
    /// Wraps `g_resolver_lookup_by_name_finish`.
    private nonisolated static let answered: GAsyncReadyCallback = { source, result, data in
        var error: UnsafeMutablePointer<GError>?
        let list = g_resolver_lookup_by_name_finish(OpaquePointer(source).map { UnsafeMutablePointer($0) },
                                                     result, &error)
        var addresses: [String] = []
        var node = list
        while let current = node {
            if let text = g_inet_address_to_string(current.pointee.data?.assumingMemoryBound(to: GInetAddress.self)) {
                addresses.append(String(cString: text))
                g_free(text)
            }
            node = current.pointee.next
        }
        if let list { g_resolver_free_addresses(list) }
        let temporary = error.map(isTemporaryFailure) ?? false
        let message = error.map { GLibError.take($0).message }
        LoopActor.assumeIsolated(Unmanaged<Lookup>.fromOpaque(data!)) { retained in
            let lookup = retained.takeRetainedValue()
            lookup.resolver?.finished(lookup.owner)
            guard !lookup.isCancelled, case .addresses(let completion) = lookup.work else { return }
            if let message {
                completion(.failure(ResolveError(message: message, isTemporary: temporary)))
            } else {
                // GLib gives only valid literals.
                completion(.success(addresses.compactMap { try? IPAddress(parsing: $0) }))
            }
        }
    }

    /// GLib found no answer for now (`G_RESOLVER_ERROR_TEMPORARY_FAILURE`: `getaddrinfo`'s
    /// `EAI_AGAIN`, a server that failed or was not reachable), as opposed to an answer
    /// (`G_RESOLVER_ERROR_NOT_FOUND`).
    private nonisolated static func isTemporaryFailure(_ error: UnsafeMutablePointer<GError>) -> Bool {
        g_error_matches(error, g_resolver_error_quark(), Int32(G_RESOLVER_ERROR_TEMPORARY_FAILURE.rawValue)) != 0
    }

    func finished(_ owner: UserID) {
        running.give(owner)
        startWaiting()
        Instruments.lookupsInFlight.record(inFlight)
        if inFlight == 0 && queued == 0 {
            // A burst of lookups is over: say how far it went (the benchmarks read this), and
            // measure the next burst on its own.
            logger.debug("resolver: all lookups done; at most \(peakInFlight) were in flight at once")
            peakInFlight = 0
        }
    }
}

/// International host names to their ASCII form.
public enum HostNameEncoding {
    /// The IDNA ASCII form of `name` (wraps `g_hostname_to_ascii`), `nil` when
    /// GLib cannot convert it.
    public static func ascii(_ name: String) -> String? {
        guard let converted = g_hostname_to_ascii(name) else { return nil }
        defer { g_free(converted) }
        return String(cString: converted)
    }
}
