import ReachabilityBus
import ReachabilityCore
import ReachabilityPlatform

/// Answers from the daemon's own evaluator, running in this process: facts from
/// NetworkManager (libnm) while it runs, else from the kernel; routes from
/// rtnetlink; names through GLib's resolver. Used when no daemon is on the bus.
final class InProcessBackend: FeedBackend {
    private let evaluator = TargetEvaluator(refreshInterval: 300)
    private var targets: [ObjectIdentifier: FeedTarget] = [:]
    /// Work waiting for the first facts.
    private var waitingForFacts: [() -> Void] = []
    /// The path feed, while a path monitor in this process runs.
    private var pathFeed: PathFeed?

    /// A target whose every new state goes to its feed.
    private final class FeedTarget: WatchedTarget {
        unowned let feed: Feed
        unowned let backend: InProcessBackend

        init(feed: Feed, backend: InProcessBackend) {
            self.feed = feed
            self.backend = backend
            switch feed.key {
            case .internet: super.init(kind: .internet, name: "")
            case .input(let input):
                if case .address(let address) = input {
                    super.init(kind: .address, name: input.name, address: address)
                } else {
                    super.init(kind: .host, name: input.name)
                }
            }
        }

        override func didChange(from old: TargetState) { publish() }
        override func lookupSettled() { publish() }

        func publish() { feed.publish(state, settled: backend.evaluator.hasFacts && isSettled) }
    }

    init() throws(ReachabilityError) {
        evaluator.targets = { [unowned self] in Array(self.targets.values) }
        evaluator.onPathChanged = { [unowned self] state in
            self.pathFeed?.publish(state, settled: self.evaluator.hasFacts)
        }
        evaluator.onEvaluated = { [unowned self] in
            for target in self.targets.values { target.publish() }
            // The first evaluation settles the path (`onPathChanged` says nothing if it is still `.none`).
            self.pathFeed?.publish(self.evaluator.pathState, settled: true)
            let waiting = self.waitingForFacts
            self.waitingForFacts = []
            for work in waiting { work() }
        }
        do {
            try evaluator.start(mode: .auto)
        } catch {
            throw .serviceUnavailable("cannot watch the kernel's network state: \(error)")
        }
    }

    func open(_ feed: Feed) {
        let target = FeedTarget(feed: feed, backend: self)
        targets[ObjectIdentifier(feed)] = target
        if evaluator.hasFacts { target.update(evaluator.state(of: target)) }
        evaluator.resolve(target)
        hostTargetsChanged()
        feed.opened(nil)
        target.publish()
    }

    func close(_ feed: Feed) {
        targets.removeValue(forKey: ObjectIdentifier(feed))?.cancel()
        hostTargetsChanged()
    }

    private func hostTargetsChanged() {
        evaluator.hostTargetsChanged(count: targets.values.lazy.filter { $0.kind == .host }.count)
    }

    /// The evaluator evaluates the paths only while this feed exists; once it has
    /// facts, setting `isPathWanted` makes `pathState` current at once.
    func openPath(_ feed: PathFeed) {
        pathFeed = feed
        evaluator.isPathWanted = true
        if evaluator.hasFacts { feed.publish(evaluator.pathState, settled: true) }
    }

    func closePath(_ feed: PathFeed) {
        guard pathFeed === feed else { return }
        pathFeed = nil
        evaluator.isPathWanted = false
    }

    func query(_ key: FeedKey, _ completion: @escaping (Result<ReachabilityState, ReachabilityError>) -> Void) {
        let answer = { [unowned self] in
            switch key {
            case .internet: completion(.success(self.evaluator.internetState))
            case .input(.address(let address)): completion(.success(self.evaluator.state(of: address)))
            case .input(.host(let name)): self.evaluator.evaluate(host: name) { completion(.success($0)) }
            }
        }
        if evaluator.hasFacts { answer() } else { waitingForFacts.append(answer) }
    }
}
