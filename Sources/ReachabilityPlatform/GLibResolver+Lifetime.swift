import CGLib
import CNetlink
import Glibc
import ReachabilityCore
import ReachabilityLoop
import Synchronization

/// How long a name's answer lives: GLib's resolver (`getaddrinfo`) gives no TTL, and GLib's
/// record lookups (`g_resolver_lookup_records`) know SRV, MX, TXT, SOA and NS but not A or
/// AAAA. So the name is asked once more, of DNS itself, with the system resolver's own
/// configuration (`res_nsearch(3)`: the same servers, search list and absolute names as
/// `getaddrinfo`'s DNS), for its A and AAAA records, and the least TTL of the answer is the
/// answer's lifetime — whichever addresses the records name. When they name none that
/// `getaddrinfo` gave, the answer moved between the two questions (or the server rotates among
/// more addresses than it gives at once): `getaddrinfo`'s answer is already old, and the name is
/// asked again when the new one runs out. With no positive DNS answer (the name came from
/// `/etc/hosts`, or from another NSS source), it has no lifetime. A name
/// `getaddrinfo` did not find is asked the same way (no addresses expected): DNS's negative
/// answer lives its negative TTL (RFC 2308: the SOA's MINIMUM, at most the SOA's own TTL),
/// so a name that is created is seen then; one with no SOA has no lifetime.
///
/// The query blocks as `getaddrinfo` does, so it runs where GLib runs its lookups, on a
/// worker thread of GIO's pool (`g_task_run_in_thread`), and is one lookup in the queue
/// (its owner's turn, its slot, `maximumInFlight`) like the others. It is made after the
/// addresses' lookup has answered (the answer is applied first), for a name whose lookup
/// found addresses or found that it has none.
extension GLibResolver {
    /// Not asked for a name of the hosts file (`localhost` among them) where the file is asked
    /// first: its answer has no lifetime, and a DNS query for it could wait on a server that
    /// never answers. Where DNS is asked first (`hosts: dns files`), the name's answer is DNS's.
    public func lifetime(of host: String, addresses: [IPAddress], owner: UserID,
                         completion: @escaping (UInt32?) -> Void) -> (any NameLookup)? {
        if !nameServiceOrder.value, hostsFile.value.contains(host.hasSuffix(".") ? String(host.dropLast()) : host) {
            return nil
        }
        return enqueue(Lookup(host: host, owner: owner, work: .lifetime(addresses: addresses, completion)))
    }

    /// Wraps `g_task_new` and `g_task_run_in_thread`.
    func startLifetime(_ lookup: Lookup, addresses: [IPAddress]) {
        let query = LifetimeQuery(name: lookup.host, notFound: addresses.isEmpty)
        query.handOver()
        let task = g_task_new(nil, nil, Self.lifetimeAnswered, Unmanaged.passRetained(lookup).toOpaque())
        g_task_set_task_data(task, Unmanaged.passRetained(query).toOpaque(), Self.releaseQuery)
        g_task_run_in_thread(task, Self.queryLifetime)
        g_object_unref(UnsafeMutableRawPointer(task))
    }

    /// The task's data goes with the task (a destroy notify: it releases, and enters nothing).
    private nonisolated static let releaseQuery: GDestroyNotify = { data in
        let query = Unmanaged<LifetimeQuery>.fromOpaque(data!)
        query.takeUnretainedValue().takeOver()
        query.release()
    }

    /// On a worker thread: the A and AAAA queries, and the least TTL of the positive answers,
    /// or with no address expected of the negative answers (-1: none). Touches nothing but the
    /// query, which is immutable.
    private nonisolated static let queryLifetime: GTaskThreadFunc = { task, _, data, _ in
        let query = Unmanaged<LifetimeQuery>.fromOpaque(data!).takeUnretainedValue()
        query.takeOver()
        var least: Int = -1
        for type: Int32 in [1, 28] {
            var message = [UInt8](repeating: 0, count: 4096)
            let count = message.withUnsafeMutableBufferPointer {
                reach_dns_query(query.name, type, $0.baseAddress, Int32($0.count))
            }
            guard count > 0 else { continue }
            let reply = Array(message[..<min(Int(count), message.count)])
            let ttl: UInt32?
            if query.notFound {
                // The name exists now (created since its lookup): the answer "not found" has no
                // lifetime left, so it is asked again at once (after the shortest wait).
                ttl = NameLifetime.parse(reply) != nil ? 0 : NameLifetime.parseNegative(reply)
            } else if let answer = NameLifetime.parse(reply) {
                // Whichever addresses it names: naming none of `getaddrinfo`'s, it moved since,
                // and taken for no lifetime the old answer was kept for the refresh interval.
                ttl = answer.ttl
            } else {
                ttl = nil
            }
            guard let ttl else { continue }
            least = least < 0 ? Int(ttl) : min(least, Int(ttl))
        }
        query.handOver()
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
///
/// It crosses threads through GLib (`g_task_run_in_thread` hands it to a worker of GIO's pool;
/// the task's end brings it back to the loop, which releases it), whose locks ThreadSanitizer
/// cannot see: GLib is not built with it, so the worker's reads of what the loop wrote, and
/// the loop's release of what the worker read, looked like races (8 reports in a run). Each
/// hand-over is therefore also a release and an acquire of `handOvers`, which the sanitizer
/// does see: the one place GLib hands over, made visible. It orders nothing GLib does not
/// already order, and costs two atomic operations a query.
final class LifetimeQuery: Sendable {
    let name: String
    /// The name's lookup found no addresses: its negative answer's lifetime is asked.
    let notFound: Bool
    private let handOvers = Atomic<Int>(0)

    init(name: String, notFound: Bool) {
        self.name = name
        self.notFound = notFound
    }

    /// Before giving it to another thread (through GLib): everything written so far is visible there.
    func handOver() { handOvers.add(1, ordering: .releasing) }

    /// After receiving it from another thread (through GLib): what that thread did is visible here.
    func takeOver() { _ = handOvers.load(ordering: .acquiring) }
}

/// A configuration file's meaning, read again when the file changed (its modification time
/// and size, one `stat` per use).
@LoopActor
final class StampedFile<Value> {
    private let path: String
    private let parse: (String) -> Value
    private var stamp: (Int, Int, Int)?
    private var cached: Value

    init(path: String, parse: @escaping (String) -> Value) {
        self.path = path
        self.parse = parse
        cached = parse("")
    }

    /// Wraps `open(2)` and `fstat(2)`.
    var value: Value {
        var info = stat()
        var now: (Int, Int, Int)?
        if case .success(let fd) = Syscall.call({ open(path, O_RDONLY | O_CLOEXEC) }) {
            if case .success = Syscall.call({ fstat(fd, &info) }) {
                now = (Int(info.st_mtim.tv_sec), Int(info.st_mtim.tv_nsec), Int(info.st_size))
            }
            close(fd)
        }
        if let now, let stamp, now == stamp { return cached }
        stamp = now
        cached = parse(Syscall.readFile(path, limit: 1 << 20) ?? "")
        return cached
    }
}

/// The hosts file (`/etc/hosts`) and the order the name service asks it in
/// (`/etc/nsswitch.conf`'s `hosts:` line): which names `getaddrinfo` answers from the file
/// rather than from DNS.
enum HostsFile {
    static let path = "/etc/hosts"
    static let nameServicePath = "/etc/nsswitch.conf"

    /// Every name of every line (the address first, `#` comments aside), lower-cased.
    nonisolated static func parse(_ text: String) -> Set<String> {
        var names: Set<String> = []
        for line in text.split(separator: "\n") {
            let fields = line.prefix { $0 != "#" }.split(whereSeparator: { $0 == " " || $0 == "\t" })
            for name in fields.dropFirst() { names.insert(name.lowercased()) }
        }
        return names
    }

    /// Whether `nsswitch.conf`'s `hosts:` line asks DNS (`dns`) before the hosts file (`files`,
    /// or `resolve`, whose systemd-resolved answers the file's names itself); without the line
    /// or the file, glibc's default, `dns [!UNAVAIL=return] files`, does. A name of the file is
    /// then DNS's answer, with its TTL.
    nonisolated static func asksDNSFirst(nsswitch text: String) -> Bool {
        for line in text.split(separator: "\n") {
            let fields = line.prefix { $0 != "#" }.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard let key = fields.first, key == "hosts:" || (key == "hosts" && fields.dropFirst().first == ":") else {
                continue
            }
            let first = fields.dropFirst().first { ["dns", "files", "resolve"].contains($0) }
            return first == "dns"
        }
        return true
    }
}
