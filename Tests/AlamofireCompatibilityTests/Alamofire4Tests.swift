import Dispatch
import ReachabilitydClient
import Synchronization
import XCTest

// Alamofire 4's manager API as its documentation describes it: a `listener` property
// (set before or after `startListening()`), a `listenerQueue`, `startListening()`
// returning whether listening started, `NetworkReachabilityManager.ConnectionType`
// with `.ethernetOrWiFi` and `.wwan`, `isReachableOnWWAN`, `networkReachabilityStatus`.
// They are deprecated; this build fails on any warning, so the tests reach them
// through a protocol whose requirements they satisfy (a witness is not a use), as a
// wrapper written for Alamofire 4 would.
protocol Alamofire4Manager: AnyObject {
    typealias Status = NetworkReachabilityManager.NetworkReachabilityStatus
    var listener: NetworkReachabilityManager.Listener? { get set }
    var listenerQueue: DispatchQueue { get set }
    func startListening() -> Bool
    func stopListening()
    var networkReachabilityStatus: Status { get }
    var isReachableOnWWAN: Bool { get }
    var isReachableOnEthernetOrWiFi: Bool { get }
    var status: Status { get }
    var isReachableOnCellular: Bool { get }
}

extension NetworkReachabilityManager: Alamofire4Manager {}

/// Alamofire 4's `.wwan`, reached as a wrapper's switch does, through a generic
/// (`ConnectionTypeSpelling`'s requirement is met by the deprecated member).
protocol ConnectionTypeSpelling: Equatable {
    static var wwan: Self { get }
    static var cellular: Self { get }
    static var ethernetOrWiFi: Self { get }
}

extension NetworkReachabilityManager.NetworkReachabilityStatus.ConnectionType: ConnectionTypeSpelling {}

/// `NetworkReachabilityManager.ConnectionType`, Alamofire 4's place for the type.
protocol HasConnectionType {
    associatedtype ConnectionType
}

extension NetworkReachabilityManager: HasConnectionType {}

final class Alamofire4Tests: XCTestCase {
    private let timeout: TimeInterval = 10

    func testListenerSetAfterStartListeningHearsTheStatusOnItsQueue() throws {
        let manager: any Alamofire4Manager = try XCTUnwrap(NetworkReachabilityManager(host: "localhost"))
        let queue = DispatchQueue(label: "alamofire4.listener")
        let key = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: key, value: true)
        manager.listenerQueue = queue
        // The listener is set after the start, before the queue runs the first call.
        queue.suspend()
        XCTAssertTrue(manager.startListening(), "startListening() says whether listening started")
        let heard = expectation(description: "the listener set after startListening() is called")
        heard.assertForOverFulfill = false
        manager.listener = { status in
            XCTAssertEqual(DispatchQueue.getSpecific(key: key), true, "on listenerQueue")
            heard.fulfill()
        }
        queue.resume()
        wait(for: [heard], timeout: timeout)
        XCTAssertEqual(manager.networkReachabilityStatus, manager.status)
        XCTAssertEqual(manager.isReachableOnWWAN, manager.isReachableOnCellular)
        XCTAssertFalse(manager.isReachableOnWWAN)
        manager.stopListening()
    }

    func testListenerSetBeforeStartListeningHearsTheFirstStatus() throws {
        let manager: any Alamofire4Manager = try XCTUnwrap(NetworkReachabilityManager())
        let heard = expectation(description: "the listener hears the status at start")
        heard.assertForOverFulfill = false
        manager.listenerQueue = DispatchQueue(label: "alamofire4.listener")
        manager.listener = { _ in heard.fulfill() }
        XCTAssertTrue(manager.startListening())
        wait(for: [heard], timeout: timeout)
        manager.stopListening()
    }

    func testWWANIsCellularAndEthernetOrWiFiIsItself() {
        XCTAssertTrue(wwanIsCellular(NetworkReachabilityManager.NetworkReachabilityStatus.ConnectionType.self))
        let status = NetworkReachabilityManager.NetworkReachabilityStatus(.isWWAN.union(.reachable))
        XCTAssertTrue(matchesWWAN(status, NetworkReachabilityManager.NetworkReachabilityStatus.reachable))
        let wired = NetworkReachabilityManager.NetworkReachabilityStatus([.reachable])
        XCTAssertFalse(matchesWWAN(wired, NetworkReachabilityManager.NetworkReachabilityStatus.reachable))
        XCTAssertEqual(wired, .reachable(.ethernetOrWiFi))
    }

    private func wwanIsCellular<T: ConnectionTypeSpelling>(_: T.Type) -> Bool {
        T.wwan == T.cellular && T.wwan != T.ethernetOrWiFi
    }

    /// `status == .reachable(.wwan)`, as an Alamofire 4 wrapper compares it.
    private func matchesWWAN<T: ConnectionTypeSpelling>(
        _ status: NetworkReachabilityManager.NetworkReachabilityStatus,
        _ reachable: (T) -> NetworkReachabilityManager.NetworkReachabilityStatus
    ) -> Bool {
        status == reachable(T.wwan)
    }

    func testConnectionTypeIsAlamofire4sNameForTheStatusConnectionType() {
        XCTAssertTrue(connectionType(of: NetworkReachabilityManager.self)
            == NetworkReachabilityManager.NetworkReachabilityStatus.ConnectionType.self)
    }

    private func connectionType<M: HasConnectionType>(of _: M.Type) -> Any.Type { M.ConnectionType.self }
}
