import Dispatch
import NetworkPath
import XCTest

// Swift 5 language mode: a pathUpdateHandler that captures and mutates a
// local, as Apple's own samples do, compiles because the handler property is
// `@preconcurrency`, as Apple's is. No bus here: the facts come in-process.
final class PathHandlerTests: XCTestCase {
    func testAHandlerMayMutateACapturedLocal() {
        let monitor = NWPathMonitor()
        let first = expectation(description: "the first path")
        var updates = 0
        monitor.pathUpdateHandler = { path in
            updates += 1
            if updates == 1 { first.fulfill() }
            _ = path.status
        }
        monitor.start(queue: DispatchQueue(label: "monitor"))
        wait(for: [first], timeout: 10)
        monitor.cancel()
        XCTAssertNotNil(monitor.queue)
    }
}
