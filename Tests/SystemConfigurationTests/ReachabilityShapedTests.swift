import Dispatch
import Foundation
import Glibc
import Synchronization
import ReachabilitydClient
import SystemConfiguration
import XCTest

// Apple's SCNetworkReachability functions used the way the libraries built on them
// use them (a notifier object handed to the callback through the context's `info`
// with `Unmanaged`, a serial dispatch queue, the zero address with its BSD length
// byte set), against the in-process engine or the daemon, whichever runs here.

/// A notifier in the shape of the most used Swift reachability library: it owns a
/// reference, passes itself unretained as the context's `info`, and hears its flags
/// on a queue of its own.
private final class Notifier: @unchecked Sendable {
    // `@unchecked`: `flags` and `heard` are touched only on `queue`, and read by the
    // test after `queue.sync`.
    let reference: SCNetworkReachability
    let queue = DispatchQueue(label: "notifier")
    var flags: SCNetworkReachabilityFlags?
    var heard: [SCNetworkReachabilityFlags] = []
    let changed = DispatchSemaphore(value: 0)

    init(_ reference: SCNetworkReachability) { self.reference = reference }

    convenience init?(hostname: String) {
        guard let reference = SCNetworkReachabilityCreateWithName(nil, hostname) else { return nil }
        self.init(reference)
    }

    /// The zero address: the internet.
    convenience init?() {
        var zeroAddress = sockaddr()
        zeroAddress.sa_len = UInt8(MemoryLayout<sockaddr>.size)
        zeroAddress.sa_family = sa_family_t(AF_INET)
        guard let reference = SCNetworkReachabilityCreateWithAddress(nil, &zeroAddress) else { return nil }
        self.init(reference)
    }

    func start(readFlags: Bool = true) -> Bool {
        let callback: SCNetworkReachabilityCallBack = { _, flags, info in
            guard let info else { return }
            let notifier = Unmanaged<Notifier>.fromOpaque(info).takeUnretainedValue()
            notifier.flags = flags
            notifier.heard.append(flags)
            notifier.changed.signal()
        }
        var context = SCNetworkReachabilityContext(version: 0, info: nil, retain: nil, release: nil, copyDescription: nil)
        context.info = UnsafeMutableRawPointer(Unmanaged<Notifier>.passUnretained(self).toOpaque())
        guard SCNetworkReachabilitySetCallback(reference, callback, &context),
            SCNetworkReachabilitySetDispatchQueue(reference, queue)
        else { return false }
        guard readFlags else { return true }
        return queue.sync {
            var flags = SCNetworkReachabilityFlags()
            guard SCNetworkReachabilityGetFlags(reference, &flags) else { return false }
            self.flags = flags
            return true
        }
    }

    func stop() {
        SCNetworkReachabilitySetCallback(reference, nil, nil)
        SCNetworkReachabilitySetDispatchQueue(reference, nil)
    }

    deinit { stop() }
}

/// Counts the context's `retain` and `release` calls (C function pointers capture nothing).
private let retains = Atomic<Int>(0)
private let releases = Atomic<Int>(0)
/// Signalled by each counted `release`.
private let released = DispatchSemaphore(value: 0)

final class ReachabilityShapedTests: XCTestCase {
    func testAHostThatResolvesIsReachable() throws {
        let notifier = try XCTUnwrap(Notifier(hostname: "localhost"))
        XCTAssertTrue(notifier.start())
        let flags = try XCTUnwrap(notifier.queue.sync { notifier.flags })
        XCTAssertTrue(flags.contains(.reachable), "\(flags)")
        notifier.stop()
    }

    func testANameOwesOneCallbackOnceScheduled() throws {
        // configd: a name target calls back once its lookup answers, even unchanged.
        let notifier = try XCTUnwrap(Notifier(hostname: "localhost"))
        XCTAssertTrue(notifier.start(readFlags: false))
        XCTAssertEqual(notifier.changed.wait(timeout: .now() + 10), .success, "no callback after scheduling")
        let heard = notifier.queue.sync { notifier.heard }
        XCTAssertEqual(heard.count, 1)
        XCTAssertEqual(heard.first?.contains(.reachable), true)
        notifier.stop()
    }

    func testAnAddressIsLocalAndDirect() throws {
        var address = sockaddr_in()
        address.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let reference = try XCTUnwrap(withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SCNetworkReachabilityCreateWithAddress(nil, $0) }
        })
        var flags = SCNetworkReachabilityFlags()
        XCTAssertTrue(SCNetworkReachabilityGetFlags(reference, &flags))
        XCTAssertEqual(flags, [.reachable, .isLocalAddress, .isDirect])
        XCTAssertTrue(reference.description.contains("127.0.0.1"), reference.description)
    }

    func testTheZeroAddressOfEitherFamilyIsTheInternet() throws {
        let v4 = try XCTUnwrap(Notifier())
        var zero6 = sockaddr_in6()
        zero6.sin6_len = UInt8(MemoryLayout<sockaddr_in6>.size)
        zero6.sin6_family = sa_family_t(AF_INET6)
        let v6 = try XCTUnwrap(withUnsafePointer(to: &zero6) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SCNetworkReachabilityCreateWithAddress(nil, $0) }
        })
        var four = SCNetworkReachabilityFlags()
        var six = SCNetworkReachabilityFlags()
        XCTAssertTrue(SCNetworkReachabilityGetFlags(v4.reference, &four))
        XCTAssertTrue(SCNetworkReachabilityGetFlags(v6, &six))
        XCTAssertEqual(four, six)
        XCTAssertTrue(four.isDisjoint(with: [.isDirect, .isLocalAddress]), "the internet is never direct: \(four)")
    }

    func testOnlyAnEmptyNameIsRefused() {
        XCTAssertNil(SCNetworkReachabilityCreateWithName(nil, ""))
        XCTAssertEqual(SCError(), kSCStatusInvalidArgument)
        XCTAssertEqual(String(cString: SCErrorString(SCError())), "Invalid argument")
        XCTAssertNotNil(SCNetworkReachabilityCreateWithName(nil, "bad name!"))
    }

    func testAnAddressOfNoIPFamilyIsRefused() {
        var unix = sockaddr()
        unix.sa_family = sa_family_t(AF_UNIX)
        XCTAssertNil(SCNetworkReachabilityCreateWithAddress(nil, &unix))
        XCTAssertEqual(SCError(), kSCStatusInvalidArgument)
        XCTAssertNil(SCNetworkReachabilityCreateWithAddressPair(nil, nil, nil))
    }

    func testAddressPairs() throws {
        func address(_ text: String) -> sockaddr_in {
            var sin = sockaddr_in()
            sin.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
            sin.sin_family = sa_family_t(AF_INET)
            inet_pton(AF_INET, text, &sin.sin_addr)
            return sin
        }
        func flags(local: String?, remote: String?) throws -> SCNetworkReachabilityFlags {
            var localAddress = address(local ?? "0.0.0.0")
            var remoteAddress = address(remote ?? "0.0.0.0")
            let reference = try withUnsafePointer(to: &localAddress) { localPointer in
                try withUnsafePointer(to: &remoteAddress) { remotePointer in
                    try localPointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { localSocket in
                        try remotePointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { remoteSocket in
                            try XCTUnwrap(SCNetworkReachabilityCreateWithAddressPair(
                                nil, local == nil ? nil : localSocket, remote == nil ? nil : remoteSocket))
                        }
                    }
                }
            }
            var flags = SCNetworkReachabilityFlags()
            XCTAssertTrue(SCNetworkReachabilityGetFlags(reference, &flags))
            return flags
        }
        // From this host's loopback address to itself: the kernel's local route.
        XCTAssertEqual(try flags(local: "127.0.0.1", remote: "127.0.0.1"), [.reachable, .isLocalAddress, .isDirect])
        // The loopback address alone: configured on a link that carries packets.
        XCTAssertEqual(try flags(local: "127.0.0.1", remote: nil), [.reachable, .isLocalAddress, .isDirect])
        // From an address that is not this host's: no route.
        XCTAssertEqual(try flags(local: "192.0.2.254", remote: "127.0.0.1"), [])
    }

    func testAURLIsANameThatIsNotReachable() throws {
        // What a real app passes: its base URL. Apple takes it, and the lookup fails.
        let notifier = try XCTUnwrap(Notifier(hostname: "https://stepik.org"))
        XCTAssertTrue(notifier.start(readFlags: false))
        XCTAssertEqual(notifier.changed.wait(timeout: .now() + 10), .success, "no callback after scheduling")
        XCTAssertEqual(notifier.queue.sync { notifier.heard }, [[]])
        notifier.stop()
    }

    func testRetainAndReleaseBalance() throws {
        retains.store(0, ordering: .relaxed)
        releases.store(0, ordering: .relaxed)
        let heard = DispatchSemaphore(value: 0)
        weak var gone: Probe?
        do {
            let probe = Probe(entered: heard, proceed: DispatchSemaphore(value: 1))
            gone = probe
            let reference = try XCTUnwrap(SCNetworkReachabilityCreateWithName(nil, "localhost"))
            var context = SCNetworkReachabilityContext(
                version: 0, info: Unmanaged.passUnretained(probe).toOpaque(),
                retain: { info in
                    retains.add(1, ordering: .relaxed)
                    return UnsafeRawPointer(Unmanaged<Probe>.fromOpaque(info).retain().toOpaque())
                },
                release: { info in
                    releases.add(1, ordering: .relaxed)
                    Unmanaged<Probe>.fromOpaque(info).release()
                    released.signal()
                },
                copyDescription: { _ in Unmanaged.passRetained(CFStringCreateWithCString(nil, "a counted probe", CFStringBuiltInEncodings.UTF8.rawValue)) })
            XCTAssertTrue(SCNetworkReachabilitySetCallback(reference, { _, _, info in
                Unmanaged<Probe>.fromOpaque(info!).takeUnretainedValue().entered.signal()
            }, &context))
            XCTAssertEqual(retains.load(ordering: .relaxed), 1, "retain runs when the context is set")
            XCTAssertTrue(SCNetworkReachabilitySetDispatchQueue(reference, DispatchQueue(label: "counted")))
            XCTAssertEqual(heard.wait(timeout: .now() + 10), .success, "no callback")
            XCTAssertTrue(SCNetworkReachabilitySetDispatchQueue(reference, nil))
            XCTAssertEqual(released.wait(timeout: .now() + 10), .success, "the callback's retain never released")
            XCTAssertEqual(retains.load(ordering: .relaxed), 2, "retain runs around the one callback")
            XCTAssertEqual(releases.load(ordering: .relaxed), 1, "and release after it; the context's own is held")
        }
        // Unscheduled, then dropped: once nothing in flight holds it (a dispatched block, an
        // answer being handed over, as on Apple's), it goes, and the context's own retain is
        // released, and so is the probe.
        XCTAssertEqual(released.wait(timeout: .now() + 10), .success, "the reference never went away")
        XCTAssertEqual(releases.load(ordering: .relaxed), 2)
        XCTAssertNil(gone, "the info object outlived every reference to it")
    }

    func testNoCallbackRunsOnceUnschedulingReturns() throws {
        // A callback in progress on the queue's thread: unscheduling from another
        // thread returns only after it has finished.
        let reference = try XCTUnwrap(SCNetworkReachabilityCreateWithName(nil, "localhost"))
        let entered = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        let probe = Probe(entered: entered, proceed: proceed)
        let box = Unmanaged.passRetained(probe)
        defer { box.release() }
        var context = SCNetworkReachabilityContext(version: 0, info: box.toOpaque(), retain: nil, release: nil,
                                                   copyDescription: nil)
        XCTAssertTrue(SCNetworkReachabilitySetCallback(reference, { _, _, info in
            let probe = Unmanaged<Probe>.fromOpaque(info!).takeUnretainedValue()
            probe.entered.signal()
            _ = probe.proceed.wait(timeout: .now() + 10)
            probe.order.withLock { $0.append("callback ended") }
        }, &context))
        XCTAssertTrue(SCNetworkReachabilitySetDispatchQueue(reference, DispatchQueue(label: "slow")))
        XCTAssertEqual(entered.wait(timeout: .now() + 10), .success, "no callback")
        let unscheduling = DispatchSemaphore(value: 0)
        let returned = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            unscheduling.signal()
            SCNetworkReachabilitySetDispatchQueue(reference, nil)
            probe.order.withLock { $0.append("unschedule returned") }
            returned.signal()
        }
        unscheduling.wait()
        proceed.signal()
        XCTAssertEqual(returned.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(probe.order.withLock { $0 }, ["callback ended", "unschedule returned"])
    }

    func testACalloutStillWaitingOnTheQueueDoesNotKeepTheReference() throws {
        // A queue that has not yet got to the callout handed to it (busy, or suspended): once
        // the reference is unscheduled and released, it goes without waiting for the queue,
        // its context's retain released, and the late callout calls nothing.
        let waiting = Mutex<[@Sendable () -> Void]>([])
        let handed = DispatchSemaphore(value: 0)
        let queue = SCNetworkReachability.CalloutQueue { work in
            waiting.withLock { $0.append(work) }
            handed.signal()
        }
        let probe = Probe(entered: DispatchSemaphore(value: 0), proceed: DispatchSemaphore(value: 0))
        weak var gone: SCNetworkReachability?
        do {
            let reference = try XCTUnwrap(SCNetworkReachabilityCreateWithName(nil, "localhost"))
            gone = reference
            var context = probe.countedContext()
            XCTAssertTrue(SCNetworkReachabilitySetCallback(reference, { _, _, info in
                Unmanaged<Probe>.fromOpaque(info!).takeUnretainedValue().order.withLock { $0.append("called") }
            }, &context))
            XCTAssertTrue(reference.schedule(queue: queue, loop: nil))
            XCTAssertEqual(handed.wait(timeout: .now() + 10), .success, "the name's owed callout never came")
            XCTAssertTrue(SCNetworkReachabilitySetDispatchQueue(reference, nil))
        }
        // The runtime's thread may hold it for a moment more (an answer being handed over):
        // it goes then, with nothing run on the queue.
        XCTAssertEqual(probe.released.wait(timeout: .now() + 10), .success,
                       "unscheduled and released, yet a callout waiting on the queue keeps it")
        XCTAssertNil(gone, "the context was released, yet the reference lives")
        XCTAssertEqual(probe.order.withLock { $0 }, ["released"], "the context's retain is released with the reference")
        for work in waiting.withLock({ $0 }) { work() }
        XCTAssertEqual(probe.order.withLock { $0 }, ["released"], "a callout run after unscheduling called back")
    }

    func testANameNotScheduledIsReadWithoutALookup() throws {
        // configd evaluates a name's path without resolving it: the internet's answer. A name
        // that cannot resolve reads as reachable until it is scheduled.
        let name = try XCTUnwrap(SCNetworkReachabilityCreateWithName(nil, "no-such-host.invalid"))
        let internet = try XCTUnwrap(Notifier())
        var named = SCNetworkReachabilityFlags()
        var zero = SCNetworkReachabilityFlags()
        XCTAssertTrue(SCNetworkReachabilityGetFlags(name, &named))
        XCTAssertTrue(SCNetworkReachabilityGetFlags(internet.reference, &zero))
        XCTAssertEqual(named, zero)
    }

    func testAScheduledReferenceOutlivesItsCreatorUntilUnscheduled() throws {
        // Apple's system holds a scheduled reference: dropped by its creator, it still calls
        // back, and the callback may unschedule the reference it is handed.
        let heard = DispatchSemaphore(value: 0)
        let checked = DispatchSemaphore(value: 0)
        let probe = Probe(entered: heard, proceed: checked)
        weak var gone: SCNetworkReachability?
        let queue = DispatchQueue(label: "orphan")
        do {
            let reference = try XCTUnwrap(SCNetworkReachabilityCreateWithName(nil, "localhost"))
            gone = reference
            var context = probe.countedContext()
            XCTAssertTrue(SCNetworkReachabilitySetCallback(reference, { target, _, info in
                let probe = Unmanaged<Probe>.fromOpaque(info!).takeUnretainedValue()
                _ = probe.proceed.wait(timeout: .now() + 10)  // until the test has seen it alive
                XCTAssertTrue(SCNetworkReachabilitySetDispatchQueue(target, nil), "unscheduling from its callback")
                probe.entered.signal()
            }, &context))
            XCTAssertTrue(SCNetworkReachabilitySetDispatchQueue(reference, queue))
        }
        XCTAssertNotNil(gone, "dropped while scheduled, yet it went away")
        checked.signal()
        XCTAssertEqual(heard.wait(timeout: .now() + 10), .success, "the scheduled reference never called back")
        // Unscheduled by its callback and owned by nobody: it goes (its context's own retain
        // released), once nothing in flight holds it.
        let deadline = DispatchTime.now() + 10
        while probe.order.withLock({ $0.filter { $0 == "released" }.count }) < 2,
            probe.released.wait(timeout: deadline) == .success {}
        XCTAssertEqual(probe.order.withLock { $0 }, ["released", "released"], "retained around the callback, then by the context")
        XCTAssertNil(gone, "unscheduled and unowned, yet still alive")
        _ = queue
    }

    func testARunLoopGetsItsCallbackOnItsOwnThread() throws {
        let reference = try XCTUnwrap(SCNetworkReachabilityCreateWithName(nil, "localhost"))
        let heard = DispatchSemaphore(value: 0)
        let box = Unmanaged.passRetained(Probe(entered: heard, proceed: DispatchSemaphore(value: 1)))
        defer { box.release() }
        var context = SCNetworkReachabilityContext(version: 0, info: box.toOpaque(), retain: nil, release: nil,
                                                   copyDescription: nil)
        XCTAssertTrue(SCNetworkReachabilitySetCallback(reference, { _, flags, info in
            let probe = Unmanaged<Probe>.fromOpaque(info!).takeUnretainedValue()
            probe.order.withLock { $0.append("\(pthread_self())") }
            probe.entered.signal()
        }, &context))
        let scheduled = DispatchSemaphore(value: 0)
        let stop = Atomic<Bool>(false)
        let loopThread = Mutex("")
        let thread = Thread {
            loopThread.withLock { $0 = "\(pthread_self())" }
            XCTAssertTrue(SCNetworkReachabilityScheduleWithRunLoop(
                reference, CFRunLoopGetCurrent(), CFRunLoopMode.defaultMode.rawValue))
            scheduled.signal()
            while !stop.load(ordering: .relaxed) {
                _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 0.05))
            }
            XCTAssertTrue(SCNetworkReachabilityUnscheduleFromRunLoop(reference, CFRunLoopGetCurrent(), .defaultMode))
        }
        thread.start()
        scheduled.wait()
        XCTAssertEqual(heard.wait(timeout: .now() + 10), .success, "no callback on the run loop")
        stop.store(true, ordering: .relaxed)
        XCTAssertEqual(box.takeUnretainedValue().order.withLock { $0 }, [loopThread.withLock { $0 }])
    }
}

/// What a callback in these tests is handed through `info`.
private final class Probe: Sendable {
    let order = Mutex<[String]>([])
    let released = DispatchSemaphore(value: 0)
    let entered: DispatchSemaphore
    let proceed: DispatchSemaphore
    init(entered: DispatchSemaphore, proceed: DispatchSemaphore) {
        self.entered = entered
        self.proceed = proceed
    }

    /// A context with this probe as `info`: retained, and on each release "released" is
    /// recorded and `released` signalled.
    func countedContext() -> SCNetworkReachabilityContext {
        SCNetworkReachabilityContext(
            version: 0, info: Unmanaged.passUnretained(self).toOpaque(),
            retain: { UnsafeRawPointer(Unmanaged<Probe>.fromOpaque($0).retain().toOpaque()) },
            release: { info in
                let probe = Unmanaged<Probe>.fromOpaque(info).takeUnretainedValue()
                probe.order.withLock { $0.append("released") }
                Unmanaged<Probe>.fromOpaque(info).release()
                probe.released.signal()
            },
            copyDescription: nil)
    }
}

final class SharedTypesTests: XCTestCase {
    /// One flags type for both products: a value of one is a value of the other.
    func testTheFlagsAreTheClientProductsFlags() {
        let fromManager: ReachabilitydClient.SCNetworkReachabilityFlags = [.reachable, .isWWAN]
        let here: SystemConfiguration.SCNetworkReachabilityFlags = fromManager
        XCTAssertEqual(
            ReachabilitydClientCore.NetworkReachabilityManager.NetworkReachabilityStatus(here), .reachable(.cellular))
        XCTAssertEqual(SCNetworkReachabilityFlags.connectionAutomatic, .connectionOnTraffic)
    }

    /// BSD's length bytes read as the family implies and ignore what is set.
    func testLengthBytesCompileAndReadTheImpliedSize() {
        var address = sockaddr()
        address.sa_len = 200
        address.sa_family = sa_family_t(AF_INET6)
        XCTAssertEqual(Int(address.sa_len), MemoryLayout<sockaddr_in6>.size)
        var v4 = sockaddr_in()
        v4.sin_len = 0
        XCTAssertEqual(Int(v4.sin_len), MemoryLayout<sockaddr_in>.size)
    }
}
