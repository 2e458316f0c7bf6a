// Apple's Reachability sample, in Swift, on the SCNetworkReachability functions:
// the internet (the zero address), a host and an address, each with a callback,
// scheduled on a dispatch queue or on a run loop. It compiles unchanged against
// Apple's SystemConfiguration; on Linux against this package's. The integration
// tests run it against the daemon and in-process. One line per event:
//
//   start internet flags=0x2 status=2      (GetFlags after scheduling)
//   callback host flags=0x0 status=0       (a callback)
//   stopped                                (after "stop": every reference unscheduled)
//
//   system-configuration-example [--runloop] [--host NAME] [--address LITERAL]
//   system-configuration-example --churn N [--host NAME] [--address LITERAL]
//
// Commands on standard input, one per line: "flags" (GetFlags of each, as
// "flags LABEL …" lines), "stop", "exit". With `--churn N` it instead makes N
// references one after another, the host and the address in turn, each with a
// counted context: sets its callback, schedules it on a queue, waits for the
// host's first callback, unschedules it and drops it, then N more, and prints
// "churned rss-growth-kb=K late-callbacks=L retains=R releases=S first-us=F
// first-callback-us-p50=P first-callback-us-p99=Q" (the resident memory the
// second N added; callbacks that ran after unscheduling returned; the time from
// `SetCallback` to the host's first callback for the process's first reference,
// and its median and 99th percentile over the host references of the second N).

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation
import SystemConfiguration
import Synchronization

func emit(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
}

func fail(_ message: String) -> Never {
    let bytes = Array(("system-configuration-example: " + message + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    exit(64)
}

/// AFNetworking's status for the flags (as Apple's sample derives its own).
func status(_ flags: SCNetworkReachabilityFlags) -> Int {
    guard flags.contains(.reachable) else { return 0 }
    let automatic = !flags.intersection([.connectionOnDemand, .connectionOnTraffic]).isEmpty
    guard !flags.contains(.connectionRequired) || (automatic && !flags.contains(.interventionRequired)) else {
        return 0
    }
    return flags.contains(.isWWAN) ? 1 : 2
}

func line(_ event: String, _ label: String, _ flags: SCNetworkReachabilityFlags) -> String {
    "\(event) \(label) flags=0x\(String(flags.rawValue, radix: 16)) status=\(status(flags))"
}

// MARK: Options

struct Options: Sendable {
    var useRunLoop = false
    var churn: Int?
    var hostName = "localhost"
    var addressText = "127.0.0.1"

    init(_ arguments: [String]) {
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            func value() -> String {
                guard let value = rest.popFirst() else { fail("\(argument) needs a value") }
                return value
            }
            switch argument {
            case "--runloop": useRunLoop = true
            case "--churn":
                guard let count = Int(value()) else { fail("--churn takes a number") }
                churn = count
            case "--host": hostName = value()
            case "--address": addressText = value()
            default: fail("unknown argument \(argument)")
            }
        }
    }
}

let options = Options(Array(CommandLine.arguments.dropFirst()))

// MARK: References

/// The zero address: Apple's "internet connection".
func internetReference() -> SCNetworkReachability? {
    var zeroAddress = sockaddr_in()
    zeroAddress.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
    zeroAddress.sin_family = sa_family_t(AF_INET)
    return withUnsafePointer(to: &zeroAddress) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SCNetworkReachabilityCreateWithAddress(nil, $0) }
    }
}

func addressReference(_ text: String) -> SCNetworkReachability? {
    var v4 = sockaddr_in()
    if inet_pton(AF_INET, text, &v4.sin_addr) == 1 {
        v4.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        v4.sin_family = sa_family_t(AF_INET)
        return withUnsafePointer(to: &v4) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SCNetworkReachabilityCreateWithAddress(nil, $0) }
        }
    }
    var v6 = sockaddr_in6()
    guard inet_pton(AF_INET6, text, &v6.sin6_addr) == 1 else { return nil }
    v6.sin6_len = UInt8(MemoryLayout<sockaddr_in6>.size)
    v6.sin6_family = sa_family_t(AF_INET6)
    return withUnsafePointer(to: &v6) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SCNetworkReachabilityCreateWithAddress(nil, $0) }
    }
}

/// What a callback is handed through the context's `info`: its label.
final class Watched: Sendable {
    let label: String
    let reference: SCNetworkReachability
    init(_ label: String, _ reference: SCNetworkReachability) {
        self.label = label
        self.reference = reference
    }
}

let callback: SCNetworkReachabilityCallBack = { _, flags, info in
    guard let info else { return }
    emit(line("callback", Unmanaged<Watched>.fromOpaque(info).takeUnretainedValue().label, flags))
}

// MARK: Churn

/// Counts, and which references were let go (a callback after that is a late one).
final class Counted: Sendable {
    let released = Atomic<Bool>(false)
    let called = DispatchSemaphore(value: 0)
}
let retains = Atomic<Int>(0)
let releases = Atomic<Int>(0)
let late = Atomic<Int>(0)

func residentKilobytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
        let row = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return 0 }
    return Int(row.split(separator: " ").dropFirst().first ?? "") ?? 0
}

/// Microseconds from `SetCallback` to the first callback, per host reference (nil: none came in 5 s).
func churnOnce(_ index: Int, queue: DispatchQueue, options: Options) -> Double? {
    let isHost = index % 2 == 0
    guard let reference = isHost
        ? SCNetworkReachabilityCreateWithName(nil, options.hostName) : addressReference(options.addressText)
    else { fail("cannot make a reference") }
    let counted = Counted()
    var context = SCNetworkReachabilityContext(
        version: 0, info: Unmanaged.passUnretained(counted).toOpaque(),
        retain: { info in
            retains.add(1, ordering: .relaxed)
            return UnsafeRawPointer(Unmanaged<Counted>.fromOpaque(info).retain().toOpaque())
        },
        release: { info in
            releases.add(1, ordering: .relaxed)
            Unmanaged<Counted>.fromOpaque(info).release()
        },
        copyDescription: nil)
    let start = DispatchTime.now().uptimeNanoseconds
    SCNetworkReachabilitySetCallback(reference, { _, _, info in
        let counted = Unmanaged<Counted>.fromOpaque(info!).takeUnretainedValue()
        if counted.released.load(ordering: .relaxed) { late.add(1, ordering: .relaxed) }
        counted.called.signal()
    }, &context)
    guard SCNetworkReachabilitySetDispatchQueue(reference, queue) else { fail("cannot schedule") }
    var elapsed: Double?
    if isHost, counted.called.wait(timeout: .now() + 5) == .success {
        elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1000
    }
    guard SCNetworkReachabilitySetDispatchQueue(reference, nil) else { fail("cannot unschedule") }
    counted.released.store(true, ordering: .relaxed)
    return elapsed
}

func percentile(_ values: [Double], _ p: Double) -> Int {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return -1 }
    return Int(sorted[min(sorted.count - 1, Int((p / 100 * Double(sorted.count - 1)).rounded()))])
}

if let churn = options.churn {
    let queue = DispatchQueue(label: "churn", attributes: .concurrent)
    let first = churnOnce(0, queue: queue, options: options)
    for index in 1..<max(churn, 1) { _ = churnOnce(index, queue: queue, options: options) }
    let before = residentKilobytes()
    let times = (0..<churn).compactMap { churnOnce($0, queue: queue, options: options) }
    let growth = residentKilobytes() - before
    // Every reference was unscheduled, then dropped: once the callbacks already handed to the
    // queue have run (each holds its reference, as a dispatched block does on Apple's), every
    // retain is released.
    queue.sync(flags: .barrier) {}
    let deadline = Date(timeIntervalSinceNow: 2)
    while releases.load(ordering: .relaxed) < retains.load(ordering: .relaxed), Date() < deadline {
        Thread.sleep(forTimeInterval: 0.01)
    }
    emit("churned rss-growth-kb=\(growth) late-callbacks=\(late.load(ordering: .relaxed))"
        + " retains=\(retains.load(ordering: .relaxed)) releases=\(releases.load(ordering: .relaxed))"
        + " first-us=\(first.map { Int($0) } ?? -1)"
        + " first-callback-us-p50=\(percentile(times, 50)) first-callback-us-p99=\(percentile(times, 99))")
    exit(0)
}

// MARK: Apple's sample

/// The sample's three references, scheduled on a queue or the main run loop.
struct Sample: Sendable {
    let watched: [Watched]
    let queue = DispatchQueue(label: "reachability")
    let useRunLoop: Bool

    init(_ options: Options) {
        guard let internet = internetReference() else { fail("cannot make the internet's reference") }
        guard let host = SCNetworkReachabilityCreateWithName(nil, options.hostName) else {
            fail("cannot make \(options.hostName)'s reference")
        }
        guard let address = addressReference(options.addressText) else {
            fail("\(options.addressText) is not an address literal")
        }
        watched = [Watched("internet", internet), Watched("host", host), Watched("address", address)]
        useRunLoop = options.useRunLoop
    }

    func schedule() {
        for item in watched {
            var context = SCNetworkReachabilityContext(
                version: 0, info: Unmanaged.passUnretained(item).toOpaque(), retain: nil, release: nil,
                copyDescription: nil)
            guard SCNetworkReachabilitySetCallback(item.reference, callback, &context) else { fail("SetCallback") }
            let ok = useRunLoop
                ? SCNetworkReachabilityScheduleWithRunLoop(item.reference, CFRunLoopGetMain(),
                                                           CFRunLoopMode.defaultMode.rawValue)
                : SCNetworkReachabilitySetDispatchQueue(item.reference, queue)
            guard ok else { fail("cannot schedule: \(String(cString: SCErrorString(SCError())))") }
        }
    }

    func report(_ event: String) {
        for item in watched {
            var flags = SCNetworkReachabilityFlags()
            guard SCNetworkReachabilityGetFlags(item.reference, &flags) else { fail("GetFlags") }
            emit(line(event, item.label, flags))
        }
    }

    func stop() {
        for item in watched {
            if useRunLoop {
                SCNetworkReachabilityUnscheduleFromRunLoop(item.reference, CFRunLoopGetMain(),
                                                           CFRunLoopMode.defaultMode.rawValue)
            } else {
                SCNetworkReachabilitySetDispatchQueue(item.reference, nil)
            }
            SCNetworkReachabilitySetCallback(item.reference, nil, nil)
        }
        emit("stopped")
    }

    /// Commands from standard input; each runs on the main run loop (with `--runloop`)
    /// or the references' queue, as the sample's controller would.
    func commands() {
        while let command = readLine() {
            let run: @Sendable () -> Void
            switch command {
            case "flags": run = { report("flags") }
            case "stop": run = { stop() }
            case "exit": exit(0)
            default: continue
            }
            if useRunLoop {
                let done = DispatchSemaphore(value: 0)
                RunLoop.main.add(Timer(timeInterval: 0, repeats: false) { _ in run(); done.signal() }, forMode: .default)
                done.wait()
            } else {
                queue.sync(execute: run)
            }
        }
        exit(0)
    }
}

let sample = Sample(options)
sample.schedule()
sample.report("start")
Thread.detachNewThread { sample.commands() }
if sample.useRunLoop {
    while true { _ = RunLoop.main.run(mode: .default, before: .distantFuture) }
} else {
    dispatchMain()
}
