import Dispatch
import Synchronization
import Testing
@testable import ReachabilityRuntime
import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop

/// The client runtime's parts that decide what a subscriber hears, without a bus: the feed
/// (the one place that knows a target's first answer), a subscription's delivery, the daemon
/// client's rule for a real answer, and the choice of mode made once.
@Suite("One subscription: the first answer, the current state, changes, the end")
struct SubscriptionTests {
    /// The feed and the subscriptions live on the loop; so do the tests (they call back synchronously).
    init() { LoopThread.start() }

    /// What a listener heard, in order.
    final class Heard: Sendable {
        private let events = Mutex<[String]>([])
        var all: [String] { events.withLock { $0 } }
        func append(_ event: String) { events.withLock { $0.append(event) } }

        @LoopActor func listener() -> Feed<FeedKey>.Listener {
            Feed<FeedKey>.Listener(receive: { self.append("state \($0.flags.map { "\($0.rawValue)" } ?? "-")") },
                          end: { self.append("end \($0.message)") },
                          established: { self.append($0.map { "failed \($0.message)" } ?? "established") })
        }
    }

    private static let reachable = ReachabilityState(flags: [.reachable])
    private static let notReachable = ReachabilityState(flags: [])

    @Test("nothing before the first real answer; then the current state to each newcomer, and each change once")
    @LoopActor func firstAnswer() {
        let feed = Feed<FeedKey>(key: .internet)
        let first = Heard()
        feed.add(1, first.listener())
        feed.opened(nil)
        feed.publish(.unknown, isAnswer: false)
        feed.publish(Self.reachable, isAnswer: false)
        #expect(first.all == ["established"])
        feed.publish(Self.reachable, isAnswer: true)
        #expect(first.all == ["established", "state 2"])
        feed.publish(Self.reachable, isAnswer: true)
        let second = Heard()
        feed.add(2, second.listener())
        #expect(second.all == ["established", "state 2"])
        feed.publish(Self.notReachable, isAnswer: false)  // after the first answer, every change counts
        #expect(first.all == ["established", "state 2", "state 0"] && second.all.last == "state 0")
    }

    @Test("a first answer equal to the state before it is still the first answer, and heard")
    @LoopActor func firstAnswerUnknown() {
        let feed = Feed<FeedKey>(key: .internet)
        let heard = Heard()
        feed.add(1, heard.listener())
        feed.opened(nil)
        feed.publish(.unknown, isAnswer: true)
        #expect(heard.all == ["established", "state -"])
    }

    @Test("a listener that joins while the watch is set up hears the answer once it is")
    @LoopActor func whileOpening() {
        let feed = Feed<FeedKey>(key: .internet)
        let heard = Heard()
        feed.add(1, heard.listener())
        feed.publish(Self.reachable, isAnswer: true)
        #expect(heard.all.isEmpty)
        feed.opened(nil)
        #expect(heard.all == ["established", "state 2"])
    }

    @Test("a watch that cannot be set up, or ends, ends every listener once; the runtime is told")
    @LoopActor func failure() {
        let feed = Feed<FeedKey>(key: .internet)
        let ended = Mutex(0)
        feed.ended = { ended.withLock { $0 += 1 } }
        let heard = Heard()
        feed.add(1, heard.listener())
        feed.opened(.tooManyTargets("limit"))
        #expect(heard.all == ["failed limit", "end limit"])
        #expect(ended.withLock { $0 } == 1 && feed.isEmpty)

        let open = Feed<FeedKey>(key: .internet)
        let later = Heard()
        open.add(1, later.listener())
        open.opened(nil)
        open.publish(Self.reachable, isAnswer: true)
        open.fail(.serviceUnavailable("gone"))
        open.publish(Self.notReachable, isAnswer: true)
        #expect(later.all == ["established", "state 2", "end gone"])
    }

    @Test("a subscription hands each answer to its queue, keeps the latest, ends once, and is silent once cancelled")
    @LoopActor func subscription() async {
        let queue = DispatchQueue(label: "subscription-test")
        let heard = Heard()
        let subscription = Subscription(FeedKey.internet, mode: .inProcess, on: queue) { result in
            dispatchPrecondition(condition: .onQueue(queue))
            switch result {
            case .success(let state): heard.append("state \(state.flags.map { "\($0.rawValue)" } ?? "-")")
            case .failure(let error): heard.append("end \(error.message)")
            }
        }
        #expect(subscription.latest == nil)
        subscription.deliver(.success(Self.reachable))
        #expect(subscription.latest == Self.reachable)
        subscription.deliver(.failure(.serviceUnavailable("gone")))
        subscription.deliver(.failure(.serviceUnavailable("again")))
        subscription.deliver(.success(Self.notReachable))
        await withCheckedContinuation { done in queue.async { done.resume() } }
        #expect(heard.all == ["state 2", "end gone"])

        // Answers handed to the queue while it is busy; cancelled before it runs them: none runs.
        let quiet = Heard()
        let cancelled = Subscription(FeedKey.internet, mode: .inProcess, on: queue) { _ in quiet.append("called") }
        let busy = DispatchSemaphore(value: 0)
        queue.async { busy.wait() }
        cancelled.deliver(.success(Self.reachable))
        cancelled.cancel()
        cancelled.deliver(.success(Self.notReachable))
        busy.signal()
        await withCheckedContinuation { done in queue.async { done.resume() } }
        #expect(quiet.all.isEmpty, "a handler ran after cancel returned: \(quiet.all)")
    }

    @Test("through the daemon, any state of an address is an answer; a host's only once its Status is known")
    @LoopActor func daemonAnswer() throws {
        let host = DaemonBackend.Watch(feed: Feed<FeedKey>(key: try ReachabilityTarget.host("example.com").key()))
        #expect(!host.isAnswer)
        host.properties = ["Status": .int32(-1), "Flags": .uint32(0)]
        #expect(!host.isAnswer)
        host.publish()
        #expect(!host.feed.hasFirstAnswer)
        host.properties = ["Status": .int32(0), "Flags": .uint32(0)]
        #expect(host.isAnswer)
        host.publish()
        #expect(host.feed.hasFirstAnswer && host.feed.state.flags == [])

        let address = DaemonBackend.Watch(feed: Feed<FeedKey>(key: try ReachabilityTarget.address("192.0.2.1").key()))
        address.properties = ["Status": .int32(-1), "Flags": .uint32(0)]
        #expect(address.isAnswer)
        address.publish()
        #expect(address.feed.hasFirstAnswer && address.feed.state.flags == nil)
    }

    @Test("the mode is chosen once: later callers get it at once; a failure is not kept")
    @LoopActor func modeChosenOnce() {
        let choice = ModeChoice()
        var asked = 0
        var pending: [(Result<ReachabilityMode, ReachabilityError>) -> Void] = []
        var results: [Result<ReachabilityMode, ReachabilityError>] = []
        let choose = { (done: @escaping (Result<ReachabilityMode, ReachabilityError>) -> Void) in
            asked += 1
            pending.append(done)
        }
        choice.get({ results.append($0) }, choose: choose)
        choice.get({ results.append($0) }, choose: choose)
        #expect(asked == 1 && results.isEmpty)
        pending.removeFirst()(.failure(.serviceUnavailable("no daemon")))
        #expect(results.count == 2)
        choice.get({ results.append($0) }, choose: choose)
        #expect(asked == 2, "a failure is asked again")
        pending.removeFirst()(.success(.daemon))
        choice.get({ results.append($0) }, choose: choose)
        #expect(asked == 2 && results.count == 4 && (try? results.last?.get()) == .daemon)
    }
}
