import ReachabilityTestSupport
import ReachabilityCore
import ReachabilityLoop
import Testing
@testable import ReachabilityPlatform

@LoopActor
private final class Hosts: EvaluationSink {
    var targets: [WatchedTarget] = []
    var evaluatedTargets: [WatchedTarget] { targets }
    func targetChanged(_ target: WatchedTarget, from old: TargetState) {}
}

private let eth0 = LinkFact(index: 2, name: "kveth0", isUp: true, hasCarrier: true, operState: .up,
                            kernelType: .ethernet, isTunnel: false)
private let via0 = RouteFact(kind: .unicast, hasGateway: true, interfaceIndex: 2, gateway: "192.0.2.1", metric: 100)

@Suite("Names follow their answers: re-looked-up at their TTL, spread")
struct NameLifetimeTests {
    init() { LoopThread.start() }

    @LoopActor private func evaluator() -> (TargetEvaluator, ScriptedResolver, Hosts) {
        let network = RecordedNetwork(links: [eth0])
        network.internet(.ipv4, via0)
        network.answers[try! IPAddress(parsing: "198.51.100.80")] = via0
        let resolver = ScriptedResolver()
        resolver.knowsLifetimes = true
        let evaluator = TargetEvaluator(refreshInterval: 300, logger: recordingLogger().logger, resolver: resolver)
        let sink = Hosts()
        evaluator.sink = sink
        evaluator.start(source: network)
        return (evaluator, resolver, sink)
    }

    @Test("the answer's TTL makes the next lookup, within its last fifth and never before 5 s")
    @LoopActor func ttl() throws {
        let (evaluator, resolver, sink) = evaluator()
        let host = WatchedTarget(.host("moving.example"))
        sink.targets = [host]
        evaluator.networkChanged()
        #expect(resolver.answer("moving.example", ["198.51.100.80"]))
        let query = try #require(resolver.lifetimeQueries.last)
        #expect(query.host == "moving.example" && query.addresses.map(\.description) == ["198.51.100.80"],
                "asked of the answer it got")
        #expect(host.state.flags == .reachable, "the answer is applied before its lifetime is known")
        let asked = MonotonicClock.microseconds()
        #expect(resolver.answerLifetime("moving.example", 60))
        let watched = try #require(host.host)
        let due = try #require(evaluator.schedule.due(watched)) - asked
        #expect(due > 47_900_000 && due <= 60_000_000, "due \(due) µs after a 60 s answer")

        // Due: looked up again, by itself; the same answer keeps its lifetime, unasked.
        evaluator.schedule.makeDue(now: try #require(evaluator.schedule.deadline))
        #expect(resolver.pending.map(\.host) == ["moving.example"])
        #expect(resolver.answer("moving.example", ["198.51.100.80"]))
        #expect(resolver.lifetimeQueries.count == 1 && evaluator.schedule.count == 1, "the same answer: no new query")
        // Another answer: its lifetime is asked.
        evaluator.resolve(host)
        #expect(resolver.answer("moving.example", ["198.51.100.81"]))
        #expect(resolver.answerLifetime("moving.example", 1))
        let short = try #require(evaluator.schedule.deadline) - MonotonicClock.microseconds()
        #expect(short > NameLifetime.shortest - 100_000 && short <= NameLifetime.shortest, "a 1 s TTL waits 5 s")
    }

    @Test("no lifetime (/etc/hosts), or one the refresh interval ends first: nothing owed, no timer")
    @LoopActor func noLifetime() throws {
        let (evaluator, resolver, sink) = evaluator()
        let local = WatchedTarget(.host("hosts.example"))
        let long = WatchedTarget(.host("long.example"))
        sink.targets = [local, long]
        evaluator.networkChanged()
        #expect(resolver.answer("hosts.example", ["198.51.100.80"]) && resolver.answer("long.example", ["198.51.100.80"]))
        #expect(resolver.answerLifetime("hosts.example", nil) && resolver.answerLifetime("long.example", 3600))
        #expect(evaluator.schedule.count == 0 && evaluator.schedule.deadline == nil)
    }

    @Test("a temporary failure asks no lifetime; a new reason to look up replaces a lifetime query at once")
    @LoopActor func replaced() throws {
        let (evaluator, resolver, sink) = evaluator()
        let host = WatchedTarget(.host("moving.example"))
        sink.targets = [host]
        evaluator.networkChanged()
        #expect(resolver.fail("moving.example", "Temporary failure in name resolution", temporary: true))
        #expect(resolver.lifetimeQueries.isEmpty)
        evaluator.resolve(host)
        #expect(resolver.answer("moving.example", ["198.51.100.80"]))
        let query = try #require(resolver.lifetimeQueries.last)
        evaluator.networkChanged()
        #expect(query.isCancelled && resolver.pending.map(\.host) == ["moving.example"],
                "the change's lookup starts at once, not after the lifetime query")
        #expect(resolver.answer("moving.example", ["198.51.100.80"]) && resolver.lifetimeQueries.count == 2)
        host.cancel()
        #expect(resolver.lifetimeQueries.last?.isCancelled == true, "a target that goes cancels it")
    }

    @Test("a name not found lives its negative TTL: asked again then (never before 5 s), unasked with none")
    @LoopActor func negative() throws {
        let (evaluator, resolver, sink) = evaluator()
        let host = WatchedTarget(.host("appearing.example"))
        sink.targets = [host]
        evaluator.networkChanged()
        #expect(resolver.fail("appearing.example", "Name or service not known"))
        let query = try #require(resolver.lifetimeQueries.last)
        #expect(query.host == "appearing.example" && query.addresses.isEmpty, "its negative answer's lifetime")
        let asked = MonotonicClock.microseconds()
        #expect(resolver.answerLifetime("appearing.example", 10))
        let watched = try #require(host.host)
        let due = try #require(evaluator.schedule.due(watched)) - asked
        #expect(due > 7_900_000 && due <= 10_000_000, "due \(due) µs after a 10 s negative answer")

        // Due: still not found, the same answer: the lifetime it had, no new query.
        evaluator.schedule.makeDue(now: try #require(evaluator.schedule.deadline))
        #expect(resolver.fail("appearing.example", "Name or service not known"))
        #expect(resolver.lifetimeQueries.count == 1 && evaluator.schedule.count == 1)
        // Created: found, and its own lifetime asked.
        evaluator.schedule.makeDue(now: try #require(evaluator.schedule.deadline))
        #expect(resolver.answer("appearing.example", ["198.51.100.80"]))
        #expect(host.state.flags == .reachable && resolver.lifetimeQueries.last?.addresses.count == 1)

        // A negative answer with no lifetime (no SOA): nothing owed.
        let other = WatchedTarget(.host("missing.example"))
        sink.targets.append(other)
        evaluator.resolve(other)
        #expect(resolver.fail("missing.example", "Name or service not known"))
        #expect(resolver.answerLifetime("missing.example", nil))
        #expect(evaluator.schedule.due(try #require(other.host)) == nil)
    }

    @Test("a popular TTL is spread: 1000 names given 60 s at one moment come due over 12 s")
    func spread() {
        let delays = (0..<1000).map { _ in
            NameLifetime.delay(ttl: 60, refreshInterval: 300, spread: Double.random(in: 0..<1))!
        }
        #expect(delays.min()! >= 48_000_000 && delays.max()! <= 60_000_000)
        // In every second of the window, about a twelfth of the names (not one burst).
        let perSecond = Dictionary(grouping: delays, by: { $0 / 1_000_000 }).mapValues(\.count)
        #expect(perSecond.count == 12 && perSecond.values.max()! < 200, "\(perSecond.sorted { $0.key < $1.key })")
        #expect(NameLifetime.delay(ttl: 0, refreshInterval: 300, spread: 0.99) == NameLifetime.shortest)
        #expect(NameLifetime.delay(ttl: 300, refreshInterval: 300, spread: 0) == nil)
    }

    @Test("the hosts file's names (asked no lifetime): every name of a line, comments aside, lower-cased")
    func hostsFile() {
        let text = "127.0.0.1\tlocalhost Localhost.Localdomain\n# 192.0.2.9 commented.test\n::1 ip6-localhost # x.test\n"
        #expect(HostsFile.parse(text) == ["localhost", "localhost.localdomain", "ip6-localhost"])
    }

    @Test("which of DNS and the hosts file the name service asks first (nsswitch.conf's hosts line)")
    func nameServiceOrder() {
        #expect(!HostsFile.asksDNSFirst(nsswitch: "passwd: files\nhosts:          files mdns4_minimal [NOTFOUND=return] dns\n"))
        #expect(HostsFile.asksDNSFirst(nsswitch: "hosts: mdns4_minimal [NOTFOUND=return] dns files # DNS first\n"))
        #expect(!HostsFile.asksDNSFirst(nsswitch: "hosts: mymachines resolve [!UNAVAIL=return] files myhostname dns\n"),
                "systemd-resolved answers the file's names itself")
        #expect(!HostsFile.asksDNSFirst(nsswitch: "# hosts: dns files\nhosts : files dns\n"), "comments aside")
        #expect(HostsFile.asksDNSFirst(nsswitch: ""), "no hosts line: glibc's default, dns [!UNAVAIL=return] files")
    }

    @Test("DNS answers: the addresses and the least TTL, CNAMEs included; errors and no address are nil")
    func parse() {
        // Header: id, flags (response, NOERROR), 1 question, 2 answers.
        var message: [UInt8] = [0x12, 0x34, 0x81, 0x80, 0, 1, 0, 2, 0, 0, 0, 0]
        let name: [UInt8] = [3] + Array("www".utf8) + [4] + Array("test".utf8) + [0]
        message += name + [0, 1, 0, 1]
        // www.test CNAME (pointer to the question's name) TTL 300 -> a.test
        message += [0xC0, 12, 0, 5, 0, 1, 0, 0, 0x01, 0x2C, 0, 8, 1, UInt8(ascii: "a"), 4] + Array("test".utf8) + [0]
        // a.test A 192.0.2.10, TTL 7
        message += [0xC0, 12, 0, 1, 0, 1, 0, 0, 0, 7, 0, 4, 192, 0, 2, 10]
        #expect(NameLifetime.parse(message) == .init(addresses: [[192, 0, 2, 10]], ttl: 7))
        var servfail = message
        servfail[3] = 0x82
        #expect(NameLifetime.parse(servfail) == nil)
        #expect(NameLifetime.parse(Array(message.prefix(message.count - 3))) == nil, "truncated")
        #expect(NameLifetime.parse(Array(message.prefix(12))) == nil)
        #expect(NameLifetime.parseNegative(message) == nil, "an address is no negative answer")
    }

    @Test("negative answers (RFC 2308): the least of the SOA's TTL and MINIMUM; none without an SOA")
    func parseNegative() {
        let name: [UInt8] = [7] + Array("missing".utf8) + [4] + Array("test".utf8) + [0]
        // Header: NXDOMAIN, 1 question, 0 answers, 1 authority record.
        var message: [UInt8] = [0x12, 0x34, 0x84, 0x03, 0, 1, 0, 0, 0, 1, 0, 0] + name + [0, 1, 0, 1]
        // test SOA, TTL 900: ns.test hostmaster.test 1 1200 120 1209600 MINIMUM 5
        let soa: [UInt8] = [2] + Array("ns".utf8) + [0xC0, 20] + [10] + Array("hostmaster".utf8) + [0xC0, 20]
            + [0, 0, 0, 1, 0, 0, 0x04, 0xB0, 0, 0, 0, 0x78, 0, 0x12, 0x75, 0, 0, 0, 0, 5]
        message += [0xC0, 20, 0, 6, 0, 1, 0, 0, 0x03, 0x84, 0, UInt8(soa.count)] + soa
        #expect(NameLifetime.parseNegative(message) == 5)
        // Trailing zeros (the resolver's buffer, whose length it did not give) are no record.
        #expect(NameLifetime.parseNegative(message + [UInt8](repeating: 0, count: 64)) == 5)
        var shortTTL = message
        shortTTL[message.count - soa.count - 3] = 2  // the SOA record's own TTL: 2 s
        shortTTL[message.count - soa.count - 4] = 0
        #expect(NameLifetime.parseNegative(shortTTL) == 2, "at most the SOA's own TTL")
        var nodata = message
        nodata[3] = 0x00
        #expect(NameLifetime.parseNegative(nodata) == 5, "NOERROR without an address (NODATA)")
        var servfail = message
        servfail[3] = 0x02
        #expect(NameLifetime.parseNegative(servfail) == nil)
        var withoutSOA = Array(message.prefix(12 + name.count + 4))
        withoutSOA[9] = 0
        #expect(NameLifetime.parseNegative(withoutSOA) == nil, "no SOA: no lifetime")
        #expect(NameLifetime.parseNegative(Array(message.dropLast(3))) == nil, "an SOA cut short")
    }
}
