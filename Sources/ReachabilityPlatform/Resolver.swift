import CGLib
import ReachabilityLoop

/// Host-name resolution through GLib's `GResolver`, which answers on the main
/// loop and never blocks it. At most `maximumInFlight` lookups run at once; the
/// rest wait in order. Every lookup can be cancelled.
@LoopActor
public final class Resolver {
    public static let maximumInFlight = 64

    /// One lookup; cancelling it drops its completion.
    @LoopActor
    public final class Lookup {
        fileprivate let host: String
        fileprivate let completion: (Result<[String], ResolveError>) -> Void
        fileprivate var cancellable: UnsafeMutablePointer<GCancellable>?
        fileprivate var isCancelled = false
        fileprivate weak var resolver: Resolver?

        fileprivate init(host: String, completion: @escaping (Result<[String], ResolveError>) -> Void) {
            self.host = host
            self.completion = completion
        }

        /// Stops the lookup (wraps `g_cancellable_cancel`); the completion is never called.
        public func cancel() {
            guard !isCancelled else { return }
            isCancelled = true
            // One not started yet is skipped when its turn comes.
            if let cancellable { g_cancellable_cancel(cancellable) }
        }
    }

    public struct ResolveError: Error, Hashable, Sendable, CustomStringConvertible {
        public let message: String
        public var description: String { message }
    }

    private let resolver: UnsafeMutablePointer<GResolver>
    /// Lookups not started yet, in order, from `waitingHead` on (a queue without O(n) removals).
    private var waiting: [Lookup] = []
    private var waitingHead = 0
    public private(set) var inFlight = 0
    /// The most lookups in flight at once since the resolver was last idle.
    public private(set) var peakInFlight = 0

    public init() { resolver = g_resolver_get_default() }

    isolated deinit { g_object_unref(resolver) }

    /// Resolves `host` (an ASCII name) to its addresses in resolver order.
    @discardableResult
    public func lookup(_ host: String, completion: @escaping (Result<[String], ResolveError>) -> Void) -> Lookup {
        let lookup = Lookup(host: host, completion: completion)
        lookup.resolver = self
        waiting.append(lookup)
        startWaiting()
        return lookup
    }

    /// The number of lookups queued behind the in-flight ones.
    public var queued: Int { waiting.count - waitingHead }

    private func startWaiting() {
        while inFlight < Self.maximumInFlight, waitingHead < waiting.count {
            let next = waiting[waitingHead]
            waitingHead += 1
            if !next.isCancelled { start(next) }
        }
        if waitingHead == waiting.count {
            waiting.removeAll(keepingCapacity: true)
            waitingHead = 0
        } else if waitingHead > 4096 {
            waiting.removeFirst(waitingHead)
            waitingHead = 0
        }
    }

    /// Wraps `g_resolver_lookup_by_name_async`.
    private func start(_ lookup: Lookup) {
        inFlight += 1
        peakInFlight = max(peakInFlight, inFlight)
        let cancellable = g_cancellable_new()
        lookup.cancellable = cancellable
        let context = Unmanaged.passRetained(lookup).toOpaque()
        g_resolver_lookup_by_name_async(resolver, lookup.host, cancellable, { source, result, data in
            let lookup = Unmanaged<Lookup>.fromOpaque(data!).takeRetainedValue()
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
            var message: String?
            if let error {
                message = String(cString: error.pointee.message)
                g_error_free(error)
            }
            if let cancellable = lookup.cancellable { g_object_unref(cancellable) }
            lookup.cancellable = nil
            lookup.resolver?.finished()
            guard !lookup.isCancelled else { return }
            if let message {
                lookup.completion(.failure(ResolveError(message: message)))
            } else {
                lookup.completion(.success(addresses))
            }
        }, context)
    }

    private func finished() {
        inFlight -= 1
        startWaiting()
        if inFlight == 0 && queued == 0 {
            // A burst of lookups is over: say how far it went (the benchmarks read this), and
            // measure the next burst on its own.
            Log.debug("resolver: all lookups done; at most \(peakInFlight) were in flight at once")
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
