import Dispatch
import Synchronization
import Testing
@testable import ReachabilityRuntime
import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop

@Suite("The Path interface's properties, decoded")
struct PathDecodingTests {
    private func entry(_ name: String, _ index: Int32, _ type: String, vpn: Bool, v4: Bool, v6: Bool,
                       _ gateways: [String]) -> DBusValue {
        .structure([.string(name), .int32(index), .string(type), .boolean(vpn), .boolean(v4), .boolean(v6),
                    .array(elementSignature: "s", gateways.map { .string($0) })])
    }

    @Test("every property, as GetAll gives them")
    func all() {
        let properties: [String: DBusValue] = [
            "Interfaces": .array(elementSignature: "(sisbbbas)", [
                entry("tun0", 7, "other", vpn: true, v4: true, v6: false, []),
                entry("wlan0", 3, "wifi", vpn: false, v4: true, v6: true, ["192.0.2.1", "fe80::1"]),
                entry("wwan0", 4, "wwan", vpn: false, v4: false, v6: false, []),
            ]),
            "Flags": .uint32(ReachabilityFlags([.reachable, .transientConnection]).rawValue),
            "DnsConfigured": .boolean(true), "Expensive": .boolean(true), "Constrained": .boolean(false),
            "LinkQuality": .string("moderate"),
        ]
        let state = PathState(properties: properties)
        #expect(state.interfaces == [
            PathInterface(name: "tun0", index: 7, type: .other, isVPN: true, usableIPv4: true),
            PathInterface(name: "wlan0", index: 3, type: .wifi, usableIPv4: true, usableIPv6: true,
                          gateways: ["192.0.2.1", "fe80::1"]),
            PathInterface(name: "wwan0", index: 4, type: .wwan),
        ])
        #expect(state.flags == [.reachable, .transientConnection])
        #expect(state.dnsConfigured && state.isExpensive && !state.isConstrained)
        #expect(state.linkQuality == .moderate)
    }

    @Test("nothing, or the wrong shapes, read as no path")
    func malformed() {
        #expect(PathState(properties: [:]) == .none)
        let wrong: [String: DBusValue] = [
            "Interfaces": .array(elementSignature: "(sis)", [.structure([.string("eth0"), .int32(2), .string("x")])]),
            "Flags": .int32(2), "DnsConfigured": .string("yes"), "LinkQuality": .uint32(3),
        ]
        #expect(PathState(properties: wrong) == .none)
        // A quality this library does not know (a newer daemon's): unknown.
        #expect(PathState(properties: ["LinkQuality": .string("excellent")]).linkQuality == .unknown)
        // An unknown type name is "other", as InterfaceType of a target.
        let odd = entry("ib0", 9, "infiniband", vpn: false, v4: true, v6: false, [])
        #expect(PathState(properties: ["Interfaces": .array(elementSignature: "(sisbbbas)", [odd])]).interfaces.first?.type
                == .other)
    }
}

@Suite("The path feed: one per backend, shared by every monitor, the same feed and subscription as a target's")
struct PathFeedTests {
    /// The feed lives on the loop; so do the tests (the feed calls back synchronously).
    init() { LoopThread.start() }

    final class Box<State: Sendable>: Sendable {
        private let states = Mutex<[State]>([])
        var received: [State] { states.withLock { $0 } }
        func append(_ state: State) { states.withLock { $0.append(state) } }
    }

    /// A subscription of either topic joined to `feed`, heard on the loop.
    @LoopActor private func join<Key: FeedTopic>(_ feed: Feed<Key>, _ box: Box<Key.State>) -> Subscription<Key> {
        let subscription = Subscription(feed.key, mode: nil, on: nil) { result in
            if case .success(let state) = result { box.append(state) }
        }
        feed.add(subscription.id, subscription.listener(established: { _ in }))
        return subscription
    }

    /// The same scenario for any topic: the rules are the feed's, not the topic's.
    @LoopActor private func firstAnswerRules<Key: FeedTopic>(_ key: Key, _ before: Key.State, _ after: Key.State) {
        let feed = Feed(key: key)
        let first = Box<Key.State>()
        let one = join(feed, first)
        feed.publish(after, isAnswer: false)
        #expect(first.received.isEmpty, "heard before the feed was set up")
        feed.opened(nil)
        #expect(first.received.isEmpty, "heard before the first answer")
        feed.publish(before, isAnswer: true)
        #expect(first.received == [before], "the first answer, even when it equals the state before it")
        feed.publish(before, isAnswer: true)
        #expect(first.received.count == 1)
        let second = Box<Key.State>()
        let two = join(feed, second)
        #expect(second.received == [before], "a newcomer hears the current state at once")
        feed.publish(after, isAnswer: false)
        #expect(first.received == [before, after] && second.received == [before, after])
        one.cancel()
        feed.publish(before, isAnswer: true)
        #expect(first.received.count == 2 && second.received.count == 3, "a cancelled subscription hears nothing")
        feed.remove(one.id)
        feed.remove(two.id)
        #expect(feed.isEmpty)
    }

    @Test("the path and a target: one Feed, one Subscription, the same first-answer rules")
    @LoopActor func sameRulesForBoth() {
        let wired = PathUpdate(path: PathState(flags: [.reachable], dnsConfigured: true))
        firstAnswerRules(PathKey(), PathKey.initialState, wired)
        firstAnswerRules(FeedKey.internet, FeedKey.initialState, ReachabilityState(flags: [.reachable]))
    }

    @Test("the path's first answer: nothing before it, then the current state to each newcomer, then changes once")
    @LoopActor func publishing() {
        let feed = Feed(key: PathKey())
        feed.opened(nil)
        let first = Box<PathUpdate>()
        let one = join(feed, first)
        let state = PathState(flags: [.reachable], dnsConfigured: true)
        feed.publish(state, isAnswer: false)
        #expect(first.received.isEmpty)
        feed.publish(state, isAnswer: true)
        #expect(first.received.map(\.path) == [state])
        feed.publish(state, isAnswer: true)
        #expect(first.received.count == 1)
        let second = Box<PathUpdate>()
        let two = join(feed, second)
        #expect(second.received.map(\.path) == [state])
        feed.publish(.none, isAnswer: true)
        #expect(first.received.map(\.path) == [state, .none] && second.received.map(\.path) == [state, .none])
        feed.remove(one.id)
        feed.remove(two.id)
        #expect(feed.isEmpty)
    }

    @Test("a first answer equal to the initial state is still the first answer, and delivered")
    @LoopActor func firstAnswerNone() {
        let feed = Feed(key: PathKey())
        feed.opened(nil)
        let box = Box<PathUpdate>()
        _ = join(feed, box)
        feed.publish(.none, isAnswer: true)
        #expect(box.received.map(\.path) == [.none])
    }

    @Test("another network is a new path; a flap back to the same is not counted")
    @LoopActor func anotherNetwork() {
        let feed = Feed(key: PathKey())
        feed.opened(nil)
        let box = Box<PathUpdate>()
        _ = join(feed, box)
        var home = PathState(flags: [.reachable], dnsConfigured: true)
        home.networkIdentity = "home"
        var office = home
        office.networkIdentity = "office"
        feed.publish(home, isAnswer: true)
        feed.publish(.none, isAnswer: true)
        feed.publish(home, isAnswer: true)
        #expect(box.received.map(\.path.invalidations) == [0, 0, 0], "back to the same network")
        feed.publish(office, isAnswer: true)
        #expect(box.received.last?.path.invalidations == 1)
    }

    @Test("each invalidation is a new update with its reason; none is heard before the first answer")
    @LoopActor func invalidations() {
        let feed = Feed(key: PathKey())
        feed.opened(nil)
        let box = Box<PathUpdate>()
        _ = join(feed, box)
        feed.invalidate(.resumed)
        #expect(box.received.isEmpty)
        feed.publish(.none, isAnswer: true)
        feed.invalidate(.dnsChanged)
        feed.invalidate(.dnsChanged)
        #expect(box.received.map(\.invalidationCount) == [1, 2, 3])
        #expect(box.received.map(\.lastInvalidation) == [.resumed, .dnsChanged, .dnsChanged])
        #expect(box.received.allSatisfy { $0.path == .none })
    }
}

/// After `cancel` returns, a subscription's handler is not called again: also when the
/// cancel comes from another thread while the feed delivers update after update.
@Suite("A path subscription's cancellation")
struct PathCancellationTests {
    init() { LoopThread.start() }

    /// A distinct path per number.
    private static func path(_ number: Int) -> PathState {
        PathState(interfaces: [PathInterface(name: "eth\(number)", index: Int32(number), type: .ethernet)])
    }

    @Test("updates handed to a busy queue, then cancelled: none runs")
    func cancelledWhileQueued() async {
        let queue = DispatchQueue(label: "path-cancel")
        let calls = Mutex(0)
        let subscription = Subscription(PathKey(), mode: nil, on: queue) { _ in calls.withLock { $0 += 1 } }
        let feed = await Feed(key: PathKey())
        let busy = DispatchSemaphore(value: 0)
        queue.async { busy.wait() }
        await Self.join(feed, subscription)
        await feed.publish(Self.path(1), isAnswer: true)
        await feed.publish(Self.path(2), isAnswer: true)
        subscription.cancel()
        await feed.publish(Self.path(3), isAnswer: true)
        busy.signal()
        await withCheckedContinuation { done in queue.async { done.resume() } }
        #expect(calls.withLock { $0 } == 0)
    }

    @Test("cancel from another thread races the updates: no call starts after it returns",
          arguments: [false, true])
    func cancelRacesUpdates(onQueue: Bool) async {
        var delivered = 0
        for round in 0..<100 {
            let queue = DispatchQueue(label: "path-race")
            let returned = Mutex(false)
            let calls = Mutex(0)
            let late = Mutex(0)
            let subscription = Subscription(PathKey(), mode: nil, on: onQueue ? queue : nil) { _ in
                if returned.withLock({ $0 }) { late.withLock { $0 += 1 } }
                // Slower than the feed: updates wait on the queue when the cancel comes.
                for _ in 0..<20 { _ = calls.withLock { $0 } }
                calls.withLock { $0 += 1 }
            }
            let feed = await Feed(key: PathKey())
            await Self.join(feed, subscription)
            let go = DispatchSemaphore(value: 0)
            let cancelled = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                go.wait()
                // A little later each round, so that it falls among the updates.
                for _ in 0..<(round * 50) { _ = calls.withLock { $0 } }
                subscription.cancel()
                returned.withLock { $0 = true }
                cancelled.signal()
            }
            await Self.publishMany(feed, go)
            cancelled.wait()
            await withCheckedContinuation { done in queue.async { done.resume() } }
            // The one call already past the subscription's check when cancel returned may still
            // run (it had started, as the documentation allows); none of the updates behind it.
            #expect(late.withLock { $0 } <= 1, "round \(round): handler calls started after cancel returned")
            delivered += calls.withLock { $0 }
        }
        #expect(delivered > 0, "the updates were delivered at all")
    }

    @LoopActor private static func join(_ feed: Feed<PathKey>, _ subscription: Subscription<PathKey>) {
        feed.opened(nil)
        feed.add(subscription.id, subscription.listener(established: { _ in }))
    }

    @LoopActor private static func publishMany(_ feed: Feed<PathKey>, _ go: DispatchSemaphore) {
        go.signal()
        for number in 0..<500 { feed.publish(path(number), isAnswer: true) }
    }
}
