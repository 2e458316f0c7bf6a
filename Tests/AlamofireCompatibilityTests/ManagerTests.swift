import Dispatch
import ReachabilitydClient
import Synchronization
import XCTest

// Alamofire 5's NetworkReachabilityManager API, used the way Alamofire's own
// tests use it (XCTest, expectations, "localhost" and the zero address), in
// Swift 6 mode. No bus here: answers come from the in-process engine. No
// public name is ever resolved; "localhost" comes from /etc/hosts.
final class ManagerTests: XCTestCase {
    private let timeout: TimeInterval = 10

    typealias Status = NetworkReachabilityManager.NetworkReachabilityStatus

    // MARK: Creating

    func testManagerForAHostNameIsCreated() {
        XCTAssertNotNil(NetworkReachabilityManager(host: "localhost"))
    }

    func testManagerForTheZeroAddressIsCreated() {
        XCTAssertNotNil(NetworkReachabilityManager())
        XCTAssertNotNil(NetworkReachabilityManager.default)
    }

    /// Apple's `SCNetworkReachabilityCreateWithName`, under Alamofire's manager, refuses
    /// only an empty name: anything else is a target that is not reachable.
    func testManagerForAnEmptyHostIsNil() {
        XCTAssertNil(NetworkReachabilityManager(host: ""))
    }

    /// A real app's base URL where a host name belongs: a manager whose state says why it
    /// is not reachable, whose listener hears so, and which is not reachable while it
    /// listens. Before listening it reads as the internet, as every name does (Apple's
    /// `SCNetworkReachabilityGetFlags` looks no name up for a reference not scheduled).
    func testManagerForAURLIsNotReachableAndSaysWhy() throws {
        let manager = try XCTUnwrap(NetworkReachabilityManager(host: "https://stepik.org"))
        let internet = try XCTUnwrap(NetworkReachabilityManager())
        XCTAssertEqual(manager.flags, internet.flags)
        XCTAssertTrue(manager.state.error.contains("stepik.org") && manager.state.error.contains(":"),
                      "the error names the problem: \(manager.state.error)")
        let heard = expectation(description: "the listener hears notReachable")
        XCTAssertTrue(manager.startListening(onQueue: .global()) { status in
            if status == .notReachable { heard.fulfill() }
        })
        wait(for: [heard], timeout: 10)
        XCTAssertEqual(manager.status, .notReachable)
        XCTAssertEqual(manager.flags, [])
        XCTAssertFalse(manager.isReachable)
        manager.stopListening()
    }

    // MARK: The current answer

    /// Not listening, a name reads as the internet, without a lookup (as Alamofire's on
    /// Apple's functions); listening, it has its own answer.
    func testLocalhostIsReachableOverEthernetOrWiFi() throws {
        let manager = try XCTUnwrap(NetworkReachabilityManager(host: "localhost"))
        let internet = try XCTUnwrap(NetworkReachabilityManager())
        XCTAssertEqual(manager.flags, internet.flags)
        XCTAssertEqual(manager.status, internet.status)
        let heard = expectation(description: "the listener was called")
        manager.startListening(onQueue: .global()) { _ in heard.fulfill() }
        wait(for: [heard], timeout: timeout)
        XCTAssertEqual(manager.status, .reachable(.ethernetOrWiFi))
        XCTAssertEqual(manager.isReachable, true)
        XCTAssertEqual(manager.isReachableOnCellular, false)
        XCTAssertEqual(manager.isReachableOnEthernetOrWiFi, true)
        XCTAssertEqual(manager.flags?.isSuperset(of: [.reachable, .isLocalAddress]), true)
        manager.stopListening()
    }

    func testTheInternetsStatusFollowsItsFlags() throws {
        let manager = try XCTUnwrap(NetworkReachabilityManager())
        let flags = try XCTUnwrap(manager.flags, "the in-process engine answers at once")
        XCTAssertEqual(manager.status, Status(flags))
        XCTAssertEqual(manager.isReachable, Status(flags) != .notReachable)
    }

    // MARK: Listening

    func testListenerHearsTheCurrentStatusWhenListeningStarts() throws {
        let manager = try XCTUnwrap(NetworkReachabilityManager(host: "localhost"))
        let heard = expectation(description: "the listener was called")
        heard.assertForOverFulfill = false
        let statuses = Mutex<[Status]>([])
        let started = manager.startListening { status in
            statuses.withLock { $0.append(status) }
            heard.fulfill()
        }
        XCTAssertTrue(started)
        wait(for: [heard], timeout: timeout)
        // Called at once with the flags at start (the internet's, read without a lookup),
        // then with localhost's own answer if it differs.
        XCTAssertEqual(statuses.withLock { $0.first }, Status(try XCTUnwrap(NetworkReachabilityManager()).flags ?? []))
        manager.stopListening()
    }

    /// Alamofire 5's documentation: `startListening` starts listening and calls the
    /// listener with the current status; for a host that is the flags the manager has at
    /// start (read without a lookup), not only the lookup's later answer. A URL where a
    /// host belongs is answered at once by its own lookup (not reachable), so the first
    /// call shows which came first: the flags at start.
    func testAHostListenerIsCalledAtStartWithTheFlagsItHas() throws {
        let manager = try XCTUnwrap(NetworkReachabilityManager(host: "https://example.com"))
        let atStart = manager.status
        XCTAssertNotEqual(atStart, .unknown, "the flags are known before listening")
        let statuses = Mutex<[Status]>([])
        let ownAnswer = expectation(description: "the target's own answer (not reachable) is heard")
        XCTAssertTrue(manager.startListening(onQueue: DispatchQueue(label: "listener")) { status in
            statuses.withLock { $0.append(status) }
            if status == .notReachable { ownAnswer.fulfill() }
        })
        wait(for: [ownAnswer], timeout: timeout)
        XCTAssertEqual(statuses.withLock { $0.first }, atStart, "the first call has the flags at start")
        manager.stopListening()
    }

    func testListenerRunsOnTheGivenQueue() throws {
        let manager = try XCTUnwrap(NetworkReachabilityManager())
        let queue = DispatchQueue(label: "listener")
        let key = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: key, value: true)
        let heard = expectation(description: "the listener ran on its queue")
        manager.startListening(onQueue: queue) { _ in
            XCTAssertEqual(DispatchQueue.getSpecific(key: key), true)
            heard.fulfill()
        }
        wait(for: [heard], timeout: timeout)
        manager.stopListening()
    }

    func testTheZeroAddressManagerListensAgainAfterStopping() throws {
        try restart(XCTUnwrap(NetworkReachabilityManager()))
    }

    func testAHostManagerListensAgainAfterStopping() throws {
        let manager = try XCTUnwrap(NetworkReachabilityManager(host: "localhost"))
        try restart(manager)
        let internet = try XCTUnwrap(NetworkReachabilityManager())
        XCTAssertEqual(manager.status, internet.status, "not listening: the internet's")
    }

    private func restart(_ manager: NetworkReachabilityManager) throws {
        let first = expectation(description: "first listener")
        let second = expectation(description: "second listener")
        manager.startListening { _ in first.fulfill() }
        wait(for: [first], timeout: timeout)
        manager.stopListening()
        manager.startListening { _ in second.fulfill() }
        wait(for: [second], timeout: timeout)
        manager.stopListening()
    }

    // MARK: Lifetime

    func testAHostManagerGoesAwayAfterListening() {
        assertGoesAway { NetworkReachabilityManager(host: "localhost") }
    }

    func testTheZeroAddressManagerGoesAwayAfterListening() {
        assertGoesAway { NetworkReachabilityManager() }
    }

    func testAManagerStillListeningGoesAway() throws {
        weak var weakManager: NetworkReachabilityManager?
        let queue: DispatchQueue
        do {
            let manager = try XCTUnwrap(NetworkReachabilityManager(host: "localhost"))
            weakManager = manager
            queue = manager.reachabilityQueue
            let heard = expectation(description: "the listener was called")
            manager.startListening { _ in heard.fulfill() }
            wait(for: [heard], timeout: timeout)
        }
        // An update being handled holds the manager for that long; none is left after this.
        queue.sync {}
        XCTAssertNil(weakManager)
    }

    private func assertGoesAway(_ make: () -> NetworkReachabilityManager?) {
        let drained = expectation(description: "the reachability queue ran")
        var manager = make()
        weak let weakManager = manager
        XCTAssertNotNil(weakManager)
        manager?.startListening(onUpdatePerforming: { _ in })
        manager?.stopListening()
        manager?.reachabilityQueue.async { drained.fulfill() }
        manager = nil
        wait(for: [drained], timeout: timeout)
        XCTAssertNil(manager)
        XCTAssertNil(weakManager)
    }

    // MARK: Open members, as Alamofire's

    /// Compiles only if each member is `open`, as in Alamofire. Sendable as its superclass:
    /// it adds no stored property.
    private final class Overriding: NetworkReachabilityManager, @unchecked Sendable {
        override var isReachable: Bool { true }
        override var isReachableOnCellular: Bool { true }
        override var isReachableOnEthernetOrWiFi: Bool { false }
        override var flags: SCNetworkReachabilityFlags? { [.reachable, .isWWAN] }
        override var status: NetworkReachabilityStatus { .reachable(.cellular) }
        override func startListening(onQueue queue: DispatchQueue = .main,
                                     onUpdatePerforming listener: @escaping Listener) -> Bool { false }
        override func stopListening() {}
    }

    func testOpenMembersCanBeOverridden() throws {
        let manager: NetworkReachabilityManager = try XCTUnwrap(Overriding(host: "localhost"))
        XCTAssertTrue(manager.isReachableOnCellular)
        XCTAssertEqual(manager.status, .reachable(.cellular))
        XCTAssertEqual(manager.flags, [.reachable, .isWWAN])
        XCTAssertFalse(manager.startListening { _ in })
    }
}

/// The status-from-flags initialiser, for every combination Alamofire's rule distinguishes.
final class StatusFromFlagsTests: XCTestCase {
    typealias Status = NetworkReachabilityManager.NetworkReachabilityStatus

    func testWithoutReachableNothingIsReachable() {
        XCTAssertEqual(Status([]), .notReachable)
        XCTAssertEqual(Status([.connectionOnDemand]), .notReachable)
        XCTAssertEqual(Status([.isWWAN, .connectionOnTraffic]), .notReachable)
    }

    func testAConnectionThatMustBeMadeIsNotReachable() {
        XCTAssertEqual(Status([.reachable, .connectionRequired]), .notReachable)
        XCTAssertEqual(Status([.reachable, .connectionRequired, .interventionRequired]), .notReachable)
        XCTAssertEqual(Status([.reachable, .connectionRequired, .connectionOnDemand, .interventionRequired]),
                       .notReachable)
    }

    func testReachableIsEthernetOrWiFi() {
        XCTAssertEqual(Status([.reachable]), .reachable(.ethernetOrWiFi))
        XCTAssertEqual(Status([.reachable, .isDirect, .isLocalAddress]), .reachable(.ethernetOrWiFi))
        XCTAssertEqual(Status([.reachable, .transientConnection]), .reachable(.ethernetOrWiFi))
    }

    func testAConnectionThatComesUpByItselfIsReachable() {
        XCTAssertEqual(Status([.reachable, .connectionRequired, .connectionOnDemand]), .reachable(.ethernetOrWiFi))
        XCTAssertEqual(Status([.reachable, .connectionRequired, .connectionOnTraffic]), .reachable(.ethernetOrWiFi))
        XCTAssertEqual(Status([.reachable, .connectionRequired, .connectionAutomatic]), .reachable(.ethernetOrWiFi))
    }

    func testWWANIsCellular() {
        XCTAssertEqual(Status([.reachable, .isWWAN]), .reachable(.cellular))
        XCTAssertEqual(Status([.reachable, .isWWAN, .connectionRequired, .connectionOnTraffic]), .reachable(.cellular))
        XCTAssertEqual(Status([.reachable, .isWWAN, .connectionRequired]), .notReachable)
    }

    func testEveryAppleFlagHasItsBit() {
        let bits: [(SCNetworkReachabilityFlags, UInt32)] = [
            (.transientConnection, 1 << 0), (.reachable, 1 << 1), (.connectionRequired, 1 << 2),
            (.connectionOnTraffic, 1 << 3), (.interventionRequired, 1 << 4), (.connectionOnDemand, 1 << 5),
            (.isLocalAddress, 1 << 16), (.isDirect, 1 << 17), (.isWWAN, 1 << 18), (.connectionAutomatic, 1 << 3),
        ]
        for (flag, bit) in bits { XCTAssertEqual(flag.rawValue, bit) }
        XCTAssertEqual(SCNetworkReachabilityFlags.connectionAutomatic, .connectionOnTraffic)
    }
}
