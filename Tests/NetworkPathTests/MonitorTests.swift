import Dispatch
import Synchronization
import Testing
@testable import NetworkPath
import ReachabilityCore
import ReachabilityLoop
@testable import ReachabilityRuntime

/// Runs `body` on the library's loop and waits for it (never from the loop itself).
private func onLoop<T: Sendable>(_ body: @escaping @LoopActor @Sendable () -> T) -> T {
    let done = DispatchSemaphore(value: 0)
    let result = Mutex<T?>(nil)
    Task { @LoopActor in
        let value = body()
        result.withLock { $0 = value }
        done.signal()
    }
    done.wait()
    return result.withLock { $0! }
}

/// The library's own path feed and subscriptions, driven by the test: `send` publishes
/// a real answer on the library's thread, which delivers to every subscription at once;
/// a new subscriber gets the latest state.
private final class FakeFeed: Sendable {
    private let feed: Feed<PathKey>
    private struct State {
        var subscriptions: [Subscription<PathKey>] = []
        var unsubscribed: [Int] = []
    }
    private let state = Mutex(State())

    init() {
        LoopThread.start()
        feed = onLoop {
            let feed = Feed(key: PathKey())
            feed.opened(nil)
            return feed
        }
    }

    var source: PathSource {
        PathSource { handler in
            let subscription = Subscription(PathKey(), mode: nil, on: nil, handler)
            self.state.withLock { $0.subscriptions.append(subscription) }
            let feed = self.feed
            onLoop { feed.add(subscription.id, subscription.listener(established: { _ in })) }
            return subscription
        }
    }

    func send(_ new: PathState) {
        leave()
        let feed = self.feed
        onLoop { feed.publish(new, isAnswer: true) }
    }

    /// Lets the cancelled subscriptions go, as the runtime does on its loop.
    private func leave() {
        let gone = state.withLock { s -> [Int] in
            let gone = s.subscriptions.filter(\.isCancelled).map(\.id)
            s.subscriptions.removeAll(where: \.isCancelled)
            s.unsubscribed += gone
            return gone
        }
        guard !gone.isEmpty else { return }
        let feed = self.feed
        onLoop { for id in gone { feed.remove(id) } }
    }

    var subscriberCount: Int {
        leave()
        return state.withLock { $0.subscriptions.count }
    }
    var unsubscribed: [Int] {
        leave()
        return state.withLock { $0.unsubscribed }
    }
}

/// The paths a handler was given, in order.
private final class Recorder: Sendable {
    private let paths = Mutex<[NWPath]>([])
    func record(_ path: NWPath) { paths.withLock { $0.append(path) } }
    var all: [NWPath] { paths.withLock { $0 } }
}

private let eth0 = PathInterface(name: "eth0", index: 2, type: .ethernet, usableIPv4: true, gateways: ["192.0.2.1"])
private let wlan0 = PathInterface(name: "wlan0", index: 3, type: .wifi, usableIPv4: true)
private let wired = PathState(interfaces: [eth0], flags: [.reachable], dnsConfigured: true)
private let both = PathState(interfaces: [eth0, wlan0], flags: [.reachable], dnsConfigured: true)

@Suite("NWPathMonitor on a fake feed")
struct MonitorTests {
    private func drain(_ queue: DispatchQueue) { queue.sync {} }

    @Test("the first path comes at once after start, then only changes")
    func firstThenChanges() {
        let feed = FakeFeed()
        feed.send(wired)
        let monitor = NWPathMonitor(.any, source: feed.source)
        let recorder = Recorder()
        monitor.pathUpdateHandler = { recorder.record($0) }
        #expect(monitor.queue == nil)
        #expect(monitor.currentPath.status == .unsatisfied)
        let queue = DispatchQueue(label: "monitor")
        monitor.start(queue: queue)
        drain(queue)
        #expect(recorder.all.map(\.status) == [.satisfied])
        #expect(monitor.queue === queue)
        #expect(monitor.currentPath.availableInterfaces.map(\.name) == ["eth0"])
        // The same facts again, and facts this monitor cannot tell apart: nothing new.
        feed.send(wired)
        var flagsOnly = wired
        flagsOnly.flags.insert(.isDirect)
        feed.send(flagsOnly)
        drain(queue)
        #expect(recorder.all.count == 1)
        feed.send(both)
        feed.send(.none)
        drain(queue)
        #expect(recorder.all.map(\.availableInterfaces.count) == [1, 2, 0])
        #expect(recorder.all.last?.status == .unsatisfied)
        monitor.cancel()
    }

    @Test("an unsatisfied first answer is still reported")
    func firstUnsatisfied() {
        let feed = FakeFeed()
        feed.send(.none)
        let monitor = NWPathMonitor(.any, source: feed.source)
        let recorder = Recorder()
        monitor.pathUpdateHandler = { recorder.record($0) }
        let queue = DispatchQueue(label: "monitor")
        monitor.start(queue: queue)
        drain(queue)
        #expect(recorder.all == [NWPath.unsatisfied])
        monitor.cancel()
    }

    @Test("a required type hears only what changes its own path")
    func requiredTypeFilters() {
        let feed = FakeFeed()
        feed.send(wired)
        let monitor = NWPathMonitor(PathRequirement(required: .wifi), source: feed.source)
        let recorder = Recorder()
        monitor.pathUpdateHandler = { recorder.record($0) }
        let queue = DispatchQueue(label: "monitor")
        monitor.start(queue: queue)
        var rewired = wired
        rewired.interfaces[0].gateways = ["192.0.2.254"]
        feed.send(rewired)
        feed.send(both)
        drain(queue)
        #expect(recorder.all.map(\.status) == [.unsatisfied, .satisfied])
        #expect(recorder.all.last?.usesInterfaceType(.wifi) == true)
        monitor.cancel()
    }

    @Test("cancel stops updates and gives the subscription back; start again does nothing")
    func cancel() {
        let feed = FakeFeed()
        feed.send(wired)
        let monitor = NWPathMonitor(.any, source: feed.source)
        let recorder = Recorder()
        monitor.pathUpdateHandler = { recorder.record($0) }
        let queue = DispatchQueue(label: "monitor")
        monitor.start(queue: queue)
        monitor.start(queue: queue)
        #expect(feed.subscriberCount == 1)
        monitor.cancel()
        #expect(feed.subscriberCount == 0)
        feed.send(both)
        monitor.start(queue: queue)
        drain(queue)
        #expect(recorder.all.count <= 1)
        #expect(feed.subscriberCount == 0)
    }

    // Apple's documentation: a monitor delivers until `cancel()`, which "cancels the
    // path monitor and stops its update handler" — started, it does not depend on the
    // caller's reference (code keeps one only in a `weak var`).
    @Test("a started monitor kept only weakly delivers until cancelled, then is freed")
    func weaklyHeldMonitor() {
        let feed = FakeFeed()
        let recorder = Recorder()
        let queue = DispatchQueue(label: "monitor")
        weak var monitor: NWPathMonitor?
        do {
            let strong = NWPathMonitor(.any, source: feed.source)
            strong.pathUpdateHandler = { recorder.record($0) }
            strong.start(queue: queue)
            monitor = strong
        }
        #expect(monitor != nil, "a started monitor must outlive its caller's last strong reference")
        feed.send(wired)
        drain(queue)
        feed.send(both)
        drain(queue)
        #expect(recorder.all.map(\.availableInterfaces.count) == [1, 2])
        monitor?.cancel()
        #expect(feed.subscriberCount == 0)
        drain(queue)
        #expect(monitor == nil, "a cancelled monitor no one holds must be freed")
        feed.send(wired)
        drain(queue)
        #expect(recorder.all.count == 2)
    }

    @Test("a monitor never started is freed with its last reference, holding no subscription")
    func unstartedMonitorGoesAway() {
        let feed = FakeFeed()
        weak var monitor: NWPathMonitor?
        do {
            let strong = NWPathMonitor(.any, source: feed.source)
            monitor = strong
        }
        #expect(monitor == nil)
        #expect(feed.subscriberCount == 0)
    }

    @Test("debugDescription names the monitor's state and path; a monitor's path has no endpoints")
    func descriptions() {
        let feed = FakeFeed()
        feed.send(wired)
        let monitor = NWPathMonitor(.any, source: feed.source)
        #expect(monitor.debugDescription.contains("not started"))
        let queue = DispatchQueue(label: "monitor")
        monitor.start(queue: queue)
        drain(queue)
        #expect(monitor.debugDescription.contains(", started,"))
        #expect(monitor.debugDescription.contains("eth0"))
        let path = monitor.currentPath
        #expect(path.debugDescription.hasPrefix("satisfied"))
        #expect(path.localEndpoint == nil)
        #expect(path.remoteEndpoint == nil)
        monitor.cancel()
        #expect(monitor.debugDescription.contains("cancelled"))
    }

    @Test("the handler set after start still gets the first path")
    func handlerAfterStart() {
        let feed = FakeFeed()
        let monitor = NWPathMonitor(.any, source: feed.source)
        let queue = DispatchQueue(label: "monitor")
        queue.suspend()
        monitor.start(queue: queue)
        feed.send(wired)
        let recorder = Recorder()
        monitor.pathUpdateHandler = { recorder.record($0) }
        queue.resume()
        drain(queue)
        #expect(recorder.all.map(\.status) == [.satisfied])
        monitor.cancel()
    }

    @Test("as an AsyncSequence: the current path, then changes, each once")
    func sequence() async {
        let feed = FakeFeed()
        feed.send(wired)
        let monitor = NWPathMonitor(.any, source: feed.source)
        var iterator = monitor.makeAsyncIterator()
        #expect(await iterator.next()?.availableInterfaces.map(\.name) == ["eth0"])
        feed.send(wired)
        feed.send(both)
        #expect(await iterator.next()?.availableInterfaces.map(\.name) == ["eth0", "wlan0"])
        #expect(feed.subscriberCount == 1)
    }

    @Test("for await over a monitor ends with its task and gives the subscription back")
    func forAwait() async {
        let feed = FakeFeed()
        feed.send(wired)
        let source = feed.source
        let task = Task {
            var seen = 0
            for await _ in NWPathMonitor(.any, source: source) { seen += 1 }
            return seen
        }
        while feed.subscriberCount == 0 { await Task.yield() }
        task.cancel()
        #expect(await task.value >= 0)
        while feed.subscriberCount != 0 { await Task.yield() }
        #expect(feed.unsubscribed.count == 1)
    }

    @Test("cancel from another thread races the updates: no handler call starts after it returns")
    func cancelRacesUpdates() {
        var delivered = 0
        for round in 0..<50 {
            let feed = FakeFeed()
            let monitor = NWPathMonitor(.any, source: feed.source)
            let returned = Mutex(false)
            let late = Mutex(0)
            let calls = Mutex(0)
            monitor.pathUpdateHandler = { _ in
                if returned.withLock({ $0 }) { late.withLock { $0 += 1 } }
                calls.withLock { $0 += 1 }
            }
            let queue = DispatchQueue(label: "monitor")
            monitor.start(queue: queue)
            let cancelled = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                for _ in 0..<(round * 100) { _ = calls.withLock { $0 } }
                monitor.cancel()
                returned.withLock { $0 = true }
                cancelled.signal()
            }
            for number in 0..<100 {
                feed.send(PathState(interfaces: [PathInterface(name: "eth\(number)", index: Int32(number),
                                                               type: .ethernet, usableIPv4: true)],
                                    flags: [.reachable], dnsConfigured: true))
            }
            cancelled.wait()
            drain(queue)
            // At most the one call already past the monitor's check when cancel returned.
            #expect(late.withLock { $0 } <= 1, "round \(round): handler calls started after cancel returned")
            delivered += calls.withLock { $0 }
        }
        #expect(delivered > 0)
    }

    @Test("without a source of facts (no subscription possible), the path is unsatisfied")
    func failureIsUnsatisfied() {
        let failed = NWPath(Result<PathUpdate, ReachabilityError>.failure(.serviceUnavailable("none")),
                            requirement: .any)
        #expect(failed == NWPath.unsatisfied)
    }
}
