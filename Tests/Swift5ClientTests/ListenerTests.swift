import ReachabilitydClient
import XCTest

// Swift 5 language mode, as most programs using Alamofire still are: the
// listener captures and mutates a local, which `startListening`'s
// `@preconcurrency` allows there (as Alamofire's does).
final class ListenerTests: XCTestCase {
    func testAListenerMayMutateACapturedLocal() {
        guard let manager = NetworkReachabilityManager(host: "localhost") else {
            XCTFail("no manager")
            return
        }
        let heard = expectation(description: "the listener was called")
        var status: NetworkReachabilityManager.NetworkReachabilityStatus?
        manager.startListening { newStatus in
            guard status == nil else { return }
            status = newStatus
            heard.fulfill()
        }
        waitForExpectations(timeout: 10)
        XCTAssertEqual(status, .reachable(.ethernetOrWiFi))
        manager.stopListening()
    }
}
