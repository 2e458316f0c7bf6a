import CoreFoundation
import Foundation
import SystemConfiguration
import XCTest

// Apple code imports Core Foundation beside SystemConfiguration and schedules on the
// main run loop with Core Foundation's own names. This file imports all three: were
// the module to declare its own `CFString`, `CFRunLoop` or `CFRunLoopMode`, it would
// not compile ("'CFString' is ambiguous for type lookup").
final class CoreFoundationTests: XCTestCase {
    func testTheTypesAreCoreFoundations() {
        let mode: CFRunLoopMode = CFRunLoopMode.defaultMode.rawValue
        XCTAssertTrue(CFEqual(mode, kCFRunLoopDefaultMode))
        let loop: CFRunLoop = CFRunLoopGetMain()
        XCTAssertEqual(CFGetTypeID(loop), CFRunLoopGetTypeID())
        let allocator: CFAllocator? = nil
        var zero = sockaddr_in()
        zero.sin_family = sa_family_t(AF_INET)
        let reference = withUnsafePointer(to: &zero) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SCNetworkReachabilityCreateWithAddress(allocator, $0) }
        }
        XCTAssertNotNil(reference)
    }

    /// Scheduled on `CFRunLoopGetMain()` in the default mode, the callback runs on the
    /// main thread while that run loop runs (XCTest runs tests there).
    func testACallbackComesOnTheMainRunLoop() throws {
        XCTAssertTrue(Thread.isMainThread, "XCTest runs this on the main thread")
        let reference = try XCTUnwrap(SCNetworkReachabilityCreateWithName(nil, "localhost"))
        var context = SCNetworkReachabilityContext(
            version: 0, info: nil, retain: nil, release: nil, copyDescription: nil)
        XCTAssertTrue(SCNetworkReachabilitySetCallback(reference, { _, _, _ in
            MainCallbacks.onMain = Thread.isMainThread
            CFRunLoopStop(CFRunLoopGetMain())
        }, &context))
        XCTAssertTrue(SCNetworkReachabilityScheduleWithRunLoop(
            reference, CFRunLoopGetMain(), CFRunLoopMode.defaultMode.rawValue))
        let deadline = Date(timeIntervalSinceNow: 10)
        while MainCallbacks.onMain == nil, Date() < deadline {
            _ = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 1, false)
        }
        XCTAssertTrue(SCNetworkReachabilityUnscheduleFromRunLoop(reference, CFRunLoopGetMain(), kCFRunLoopDefaultMode))
        XCTAssertEqual(MainCallbacks.onMain, true, "the callback ran on the main run loop's thread")
    }
}

/// Written by the callback on the main thread, read there: `nonisolated(unsafe)`
/// because only the main thread touches it.
private enum MainCallbacks {
    nonisolated(unsafe) static var onMain: Bool?
}
