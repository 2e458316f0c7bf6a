import CGLib
import CNetlink
import ReachabilityCore
import ReachabilityLoop

/// How long a name's answer lives: GLib's resolver (`getaddrinfo`) gives no TTL, and GLib's
/// record lookups (`g_resolver_lookup_records`) know SRV, MX, TXT, SOA and NS but not A or
/// AAAA. So the name is asked once more, of DNS itself, with the system resolver's own
/// configuration (`res_nsearch(3)`: the same servers, search list and absolute names as
/// `getaddrinfo`'s DNS), for its A and AAAA records, and the least TTL of the answer is the
/// answer's lifetime — when the records name an address `getaddrinfo` gave. When none does
/// (the name came from `/etc/hosts`, or from another NSS source), it has no lifetime.
///
/// The query blocks as `getaddrinfo` does, so it runs where GLib runs its lookups, on a
/// worker thread of GIO's pool (`g_task_run_in_thread`), and is one lookup in the queue
/// (its owner's turn, its slot, `maximumInFlight`) like the others. It is made after the
/// addresses' lookup has answered (the answer is applied first), and only for a name whose
/// lookup found addresses.
extension GLibResolver {
    public func lifetime(of host: String, addresses: [IPAddress], owner: UserID,
                         completion: @escaping (UInt32?) -> Void) -> (any NameLookup)? {
        enqueue(Lookup(host: host, owner: owner, work: .lifetime(addresses: addresses, completion)))
    }

    /// Wraps `g_task_new` and `g_task_run_in_thread`.
    func startLifetime(_ lookup: Lookup, addresses: [IPAddress]) {
        let query = LifetimeQuery(name: lookup.host, expected: Set(addresses.map(\.bytes)))
        let task = g_task_new(nil, nil, Self.lifetimeAnswered, Unmanaged.passRetained(lookup).toOpaque())
        g_task_set_task_data(task, Unmanaged.passRetained(query).toOpaque(), Self.releaseQuery)
        g_task_run_in_thread(task, Self.queryLifetime)
        g_object_unref(UnsafeMutableRawPointer(task))
    }

    /// The task's data goes with the task (a destroy notify: it releases, and enters nothing).
    private nonisolated static let releaseQuery: GDestroyNotify = { data in
        Unmanaged<LifetimeQuery>.fromOpaque(data!).release()
    }

    /// On a worker thread: the A and AAAA queries, and the least TTL of the answers that name
    /// an expected address (-1: none). Touches nothing but the query, which is immutable.
    private nonisolated static let queryLifetime: GTaskThreadFunc = { task, _, data, _ in
        let query = Unmanaged<LifetimeQuery>.fromOpaque(data!).takeUnretainedValue()
        var least: Int = -1
        for type: Int32 in [1, 28] {
            var message = [UInt8](repeating: 0, count: 4096)
            let count = message.withUnsafeMutableBufferPointer {
                reach_dns_query(query.name, type, $0.baseAddress, Int32($0.count))
            }
            guard count > 0, let answer = NameLifetime.parse(Array(message[..<min(Int(count), message.count)])),
                  answer.addresses.contains(where: query.expected.contains) else { continue }
            least = least < 0 ? Int(answer.ttl) : min(least, Int(answer.ttl))
        }
        g_task_return_int(task, least)
    }

    /// The task's end, on the loop's context (where it was made). Wraps `g_task_propagate_int`.
    private nonisolated static let lifetimeAnswered: GAsyncReadyCallback = { _, result, data in
        let ttl = g_task_propagate_int(result, nil)
        LoopActor.assumeIsolated(Unmanaged<Lookup>.fromOpaque(data!)) { retained in
            let lookup = retained.takeRetainedValue()
            lookup.resolver?.finished(lookup.owner)
            guard !lookup.isCancelled, case .lifetime(_, let completion) = lookup.work else { return }
            completion(ttl >= 0 ? UInt32(clamping: ttl) : nil)
        }
    }
}

/// What a worker thread needs for one lifetime query; never changed once made.
final class LifetimeQuery: Sendable {
    let name: String
    let expected: Set<[UInt8]>
    init(name: String, expected: Set<[UInt8]>) {
        self.name = name
        self.expected = expected
    }
}
