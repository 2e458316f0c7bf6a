#if canImport(SystemConfiguration)
import SystemConfiguration
import XCTest

// Swift 5 language mode, as most programs written for Apple's SystemConfiguration
// are: a global function passed as the callback, which Apple's `@convention(c)` type
// takes. It must compile here without a warning (the build fails on any).

/// What the callback heard, and a semaphore signalled on each call. `@unchecked
/// Sendable`: `heard` is written only on the reference's serial queue and read after
/// `queue.sync`.
private final class Heard: @unchecked Sendable {
    var flags: [SCNetworkReachabilityFlags] = []
    let called = DispatchSemaphore(value: 0)
}

private func reachabilityChanged(
    _ target: SCNetworkReachability, _ flags: SCNetworkReachabilityFlags, _ info: UnsafeMutableRawPointer?
) {
    guard let info else { return }
    let heard = Unmanaged<Heard>.fromOpaque(info).takeUnretainedValue()
    heard.flags.append(flags)
    heard.called.signal()
}

final class GlobalCallbackTests: XCTestCase {
    func testAGlobalFunctionIsTheCallback() throws {
        let reference = try XCTUnwrap(SCNetworkReachabilityCreateWithName(nil, "localhost"))
        let heard = Heard()
        let queue = DispatchQueue(label: "callback")
        var context = SCNetworkReachabilityContext(
            version: 0, info: nil, retain: nil, release: nil, copyDescription: nil)
        context.info = Unmanaged.passUnretained(heard).toOpaque()
        XCTAssertTrue(SCNetworkReachabilitySetCallback(reference, reachabilityChanged, &context))
        // The same function through the type's name, as code that keeps it in a constant.
        let stored: SCNetworkReachabilityCallBack = reachabilityChanged
        XCTAssertTrue(SCNetworkReachabilitySetCallback(reference, stored, &context))
        XCTAssertTrue(SCNetworkReachabilitySetDispatchQueue(reference, queue))
        XCTAssertEqual(heard.called.wait(timeout: .now() + 10), .success, "the callback was not called")
        SCNetworkReachabilitySetDispatchQueue(reference, nil)
        SCNetworkReachabilitySetCallback(reference, nil, nil)
        let first = try XCTUnwrap(queue.sync { heard.flags.first })
        XCTAssertTrue(first.isSuperset(of: [.reachable, .isLocalAddress]), "\(first)")
    }
}
#endif
