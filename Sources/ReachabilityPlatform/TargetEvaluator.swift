import Glibc
import Logging
import ReachabilityCore
import ReachabilityFairness
import ReachabilityLoop

/// Turns network facts into target states, for the daemon and for the client
/// library's in-process mode alike: reads the facts once per burst of changes,
/// evaluates every target, and tells its `sink` what changed.
///
/// Its parts, one concern each:
/// - this file: the facts (the internet's routes among them) and the evaluation
///   after a change;
/// - `RouteAnswers`: the kernel's route answers, kept until an event or their
///   lifetime ends;
/// - `TargetEvaluator+Targets`: what differs per kind of target, each rule one
///   exhaustive `switch` over `WatchedTarget.Spec`;
/// - `TargetEvaluator+Lookups`: host names, looked up through a `NameResolver` on
///   every network change, on demand, and on a refresh timer that exists only
///   while host targets exist; `LookupSchedule`: again soon after a temporary failure,
///   and when an answer's lifetime (its TTL) runs out;
/// - `PathEvaluation`: the per-interface paths, only while wanted;
/// - `TargetEvaluator+Users`: the answers of users the uid rules route otherwise;
/// - `TargetEvaluator+Queries`: one-shot answers, kept nowhere.
@LoopActor
public final class TargetEvaluator {
    var source: NetworkFactSource?
    /// Where the evaluator and everything it makes (the resolver, the network observer) log.
    let logger: Logger
    /// Looks host names up.
    let resolver: any NameResolver
    public private(set) var facts: NetworkFacts = .unknown
    /// Whether the facts have been read at least once (a first answer exists).
    public private(set) var hasFacts = false
    /// Whether the last evaluation read every source's first answer (`NetworkFactSource.hasFirstAnswer`):
    /// its states are the ones to give a first caller.
    public private(set) var everySourceAnswered = false
    /// The kernel's route answers.
    private(set) lazy var answers = RouteAnswers { [unowned self] in self.networkChanged() }
    /// The per-interface paths.
    let paths = PathEvaluation()
    /// The answers of users the uid rules route otherwise, for this evaluation.
    var users = PerUserAnswers()
    /// Within `networkChanged()`: its one debug line tells what was done.
    var isEvaluating = false
    /// Looks every host up again, while host targets exist.
    var refreshTimer: SourceHandle?
    /// The lookups owed at a time of their own: after a temporary failure, at an answer's TTL.
    private(set) lazy var schedule = LookupSchedule { [unowned self] in self.resolve($0, afresh: false) }
    let refreshInterval: UInt32
    /// Resumes from sleep (the live network only).
    private var sleepWatch: SleepWatch?
    /// Within `resumed`: the invalidation is `resumed`, whatever the paths say.
    private var isResuming = false

    /// Where every result goes (weak: the sink owns this evaluator).
    public weak var sink: EvaluationSink?

    /// When the first answer in use stops being true on its own (monotonic microseconds):
    /// the earliest end of a route's lifetime among the kept answers and the path's;
    /// `nil` when none has a lifetime. The answers are asked again then.
    public var nextExpiry: Int64? { answers.nextExpiry }

    /// Whether anybody wants the per-interface paths (the `Path` interface): they are
    /// evaluated after each change only while this is set, and at once when it is
    /// set (once the facts were read), so `pathState` is current when it returns.
    /// Cleared, nothing is asked of the kernel for them and `pathState` is `.none`.
    public var isPathWanted = false {
        didSet {
            guard isPathWanted != oldValue else { return }
            if isPathWanted {
                if hasFacts { evaluatePath() }
            } else {
                paths.reset()
            }
        }
    }
    /// The per-interface paths, as of the last evaluation while `isPathWanted` was set.
    public var pathState: PathState { paths.state }
    /// How many times the paths were evaluated: an in-process test can check that none
    /// happens while they are not wanted (the daemon logs each one with `--verbose`).
    public var pathEvaluations: Int { paths.count }

    /// `resolver` looks the host names up (`nil`: GLib's; a test brings its own).
    public init(refreshInterval: UInt32, logger: Logger, resolver: (any NameResolver)? = nil) {
        self.refreshInterval = refreshInterval
        self.logger = logger
        self.resolver = resolver ?? GLibResolver(logger: logger)
    }

    /// Starts watching the network; the first evaluation follows on the loop. A source
    /// that cannot be read is logged at `failureLevel` (see `NetworkObserver.init`). With
    /// `upstream` (the daemon's), how TCP connections end is followed too
    /// (`NetworkObserver.followConnectionOutcomes`; `window` and `askInterval` in µs).
    public func start(mode: BackendMode, failureLevel: Logger.Level,
                      upstream: (destinations: Int, window: Int64, askInterval: Int64)? = nil) throws(NetlinkError) {
        let observer = try NetworkObserver(mode: mode, logger: logger, failureLevel: failureLevel) {
            [unowned self] in self.networkChanged()
        }
        if let upstream {
            observer.followConnectionOutcomes(destinations: upstream.destinations, window: upstream.window,
                                              askInterval: upstream.askInterval)
        }
        start(source: observer)
        sleepWatch = SleepWatch(logger: logger) { [unowned self] why in self.resumed(why) }
    }

    /// After a resume (`SleepWatch`): everything read again at once, on the loop, before any
    /// other call is answered — links, addresses, routes, rules and neighbours (every cached
    /// route answer forgotten), and every host looked up again — and then the invalidation.
    public func resumed(_ why: String) {
        logger.info("resumed from sleep (\(why)); evaluating everything again")
        isResuming = true
        reevaluateEverything()
        isResuming = false
        sink?.invalidated(.resumed)
    }

    /// Reads the network from `source` instead (recorded answers a test replays); the
    /// test calls `networkChanged()` where the live source would have.
    public func start(source: NetworkFactSource) {
        self.source = source
        answers.source = source
    }

    /// Re-reads the facts after a change, and forgets the route answers the
    /// kernel's events made stale. `everything` (a refresh) forgets them all.
    /// The internet's routes are the kernel's answers for `internetDestinations`,
    /// looked up and cached like any other address's.
    public func reload(everything: Bool = false) {
        // Invalidation first: it reads the events still queued, which the facts must not predate.
        let stale = source?.takeRouteInvalidation() ?? RouteInvalidation(all: true)
        facts = source?.facts() ?? .unknown
        // The rules are read again only when a routing event (rules among them) came.
        if everything || stale.all || !hasFacts { users.uidRules = source?.uidRules() ?? UIDRules() }
        users.startEvaluation()
        answers.startEvaluation(stale: stale, everything: everything)
        if facts.backend != .none {
            answers.prefetch(Self.internetDestinations.flatMap(\.addresses))
            for (family, addresses) in Self.internetDestinations {
                facts.internetRoutes[family] = addresses.map { answers.route(to: $0) }
            }
            if facts.links.values.contains(where: { $0.isUsable && Engine.isVPN($0, facts: facts) }) {
                facts.underlayLinks = underlayLinks()
            }
        }
        sink?.factsReloaded(facts)
    }

    /// The links a tunnel's packets can leave the machine through: those with a
    /// unicast route through a gateway (in any table: a host route to the VPN
    /// server is enough), and point-to-point links with any unicast route
    /// (`Engine.hasUnderlay` judges them). Asked on every reload while a VPN link
    /// can carry packets, never otherwise. `nil` (not asked) when this namespace
    /// has no link that is neither a VPN nor loopback: the tunnel's packets then
    /// leave from another namespace (a WireGuard device moved into a container),
    /// whose links cannot be seen from here.
    private func underlayLinks() -> Set<Int32>? {
        let candidates = facts.links.values.filter { $0.kernelType != .loopback && !Engine.isVPN($0, facts: facts) }
        guard !candidates.isEmpty, let source else { return nil }
        let routed = source.routedLinks()
        return routed.viaGateway.union(routed.onLink.filter { facts.links[$0]?.isPointToPoint == true })
    }

    /// What the internet target asks the kernel: the route a packet to each of
    /// these global unicast addresses would take. None is in a special-purpose
    /// block (RFC 6890: no documentation, benchmarking or shared-address range
    /// that labs and test networks route), each belongs to a different operator
    /// and a different /8 (or /16), and the family's path is the one most of
    /// them take, so a split tunnel or a lab route that covers one does not
    /// speak for the internet. No packet is ever sent to them: `RTM_GETROUTE` is
    /// a lookup in the kernel's tables and rules, nothing more.
    public nonisolated static let internetDestinations: [(family: AddressFamily, addresses: [IPAddress])] = [
        (.ipv4, ["8.8.8.8", "1.1.1.1", "9.9.9.9"].map { try! IPAddress(parsing: $0) }),
        (.ipv6, ["2001:4860:4860::8888", "2606:4700:4700::1111", "2620:fe::fe"].map { try! IPAddress(parsing: $0) }),
    ]

    /// One evaluation of every target after a burst of changes; host names are
    /// looked up again (their routes are re-evaluated at once meanwhile).
    public func networkChanged() {
        let start = MonotonicClock.microseconds()
        let lookupsBefore = users.lookups
        isEvaluating = true
        defer { isEvaluating = false }
        reload()
        hasFacts = true
        everySourceAnswered = source?.hasFirstAnswer ?? false
        let targets = sink?.evaluatedTargets ?? []
        prefetchRoutes(for: targets)
        defer { armAnswers() }
        let states = targets.map { state(of: $0) }
        let evaluated = MonotonicClock.microseconds()
        var changed: [WatchedTarget] = []
        for (target, state) in zip(targets, states) {
            if apply(state, to: target) { changed.append(target) }
        }
        let announced = MonotonicClock.microseconds()
        Instruments.evaluation.recordMicroseconds(evaluated - start)
        let path = isPathWanted ? "; " + evaluatePath(logged: false) : ""
        // One line per evaluation, naming what changed and why (the first few), the path's
        // evaluation and the lookups made for other users' uid rules included.
        logger.debug("""
            evaluated \(targets.count) targets in \(Double(evaluated - start) / 1000) ms; \
            announced \(changed.count) changes in \(Double(announced - evaluated) / 1000) ms\
            \(changed.prefix(5).map { "; \($0.logName): \($0.state.summary)" }.joined())\
            \(changed.count > 5 ? "; …" : "")\
            \(users.lookups > lookupsBefore ? "; \(users.lookups - lookupsBefore) lookups for other uids" : "")\
            \(path)
            """)
        // Announced first; then the names are looked up again.
        for target in targets { resolve(target) }
        sink?.evaluationFinished()
    }

    /// Evaluates everything again from scratch: every fact re-read, every cached route
    /// forgotten, every host looked up again (a reload the administrator asks for).
    public func reevaluateEverything() {
        answers.forgetAll()
        networkChanged()
    }

    /// Gives `target` a new state, and its holders whose uid the rules route otherwise their
    /// own answers (`refreshViews`); tells the sink, and returns true, when either changed.
    @discardableResult
    public func apply(_ state: TargetState, to target: WatchedTarget) -> Bool {
        // The holders' own answers first: an announcement tells each listener its own.
        let viewsChanged = refreshViews(of: target)
        guard let old = target.update(state) else {
            if viewsChanged { sink?.targetChanged(target, from: target.state) }
            return viewsChanged
        }
        sink?.targetChanged(target, from: old)
        return true
    }

    /// After a reload outside a network change (`Refresh`): the paths follow the
    /// new facts too, while wanted.
    public func reloaded() {
        if isPathWanted && hasFacts { evaluatePath() }
        armAnswers()
    }

    /// Arms the answers' one timer and follows their gateways (`RouteAnswers.settle`).
    private func armAnswers() {
        answers.settle(pathExpiry: paths.expiry, pathGateways: pathState.interfaces.flatMap(\.gateways))
    }

    /// Evaluates the paths from the current facts and tells the sink of a change. Says so
    /// in a debug line of its own unless `logged` is false: then the caller's line carries
    /// the words returned.
    @discardableResult
    private func evaluatePath(logged: Bool = true) -> String {
        let (changed, invalidation, words) = paths.evaluate(facts, source: source)
        if logged { logger.debug("\(words)") }
        // With uid rules, a holder's own path may change while the shared one does not.
        if changed || !users.uidRules.isEmpty { sink?.pathChanged(paths.state) }
        // Around a sleep, `resumed` says it instead, once: at most one notice per event.
        if let invalidation, !isResuming, sleepWatch?.isAsleep != true { sink?.invalidated(invalidation) }
        return words
    }

    /// Gives back the storage of the route cache after many targets went away.
    public func compactRoutes() { answers.compact() }
}
