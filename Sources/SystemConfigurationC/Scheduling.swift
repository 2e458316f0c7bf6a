import CDispatchQueue
import CoreFoundation
import SystemConfiguration

// The callback and scheduling functions of the C API: the C callback and context
// become the module's Swift ones, a C run loop and mode are Core Foundation's own
// objects, and a C dispatch queue is called through libdispatch.

/// `SCNetworkReachabilityCallBack`: `void (*)(SCNetworkReachabilityRef, SCNetworkReachabilityFlags, void *)`.
public typealias CCallBack = @convention(c) (UnsafeMutableRawPointer?, UInt32, UnsafeMutableRawPointer?) -> Void

/// A C function pointer handed to the module's callback. `@unchecked Sendable`, proved:
/// the pointer is never changed, and Apple's contract lets it be called on any thread.
private struct CallBackBox: @unchecked Sendable {
    let function: CCallBack
}

/// `SCNetworkReachabilitySetCallback`. The context is Apple's C structure (`version`,
/// `info`, `retain`, `release`, `copyDescription`, each a word), read field by field.
@_cdecl("SCNetworkReachabilitySetCallback")
public func cSetCallback(
    _ target: UnsafeMutableRawPointer?, _ callout: CCallBack?, _ context: UnsafeRawPointer?
) -> Bool {
    guard let reference = borrowed(target) else { return SCStatus.fail() }
    guard let callout else { return SCNetworkReachabilitySetCallback(reference, nil, nil) }
    let box = CallBackBox(function: callout)
    var swiftContext = context.map(readContext) ?? SCNetworkReachabilityContext()
    return SCNetworkReachabilitySetCallback(reference, { target, flags, info in
        box.function(Unmanaged.passUnretained(target).toOpaque(), flags.rawValue, info)
    }, &swiftContext)
}

/// Apple's `SCNetworkReachabilityContext` as C lays it out: five pointer-sized fields.
private func readContext(_ raw: UnsafeRawPointer) -> SCNetworkReachabilityContext {
    let word = MemoryLayout<Int>.stride
    return SCNetworkReachabilityContext(
        version: raw.load(fromByteOffset: 0, as: CFIndex.self),
        info: raw.load(fromByteOffset: word, as: UnsafeMutableRawPointer?.self),
        retain: raw.load(
            fromByteOffset: 2 * word, as: (@convention(c) (UnsafeRawPointer) -> UnsafeRawPointer)?.self),
        release: raw.load(fromByteOffset: 3 * word, as: (@convention(c) (UnsafeRawPointer) -> Void)?.self),
        copyDescription: raw.load(
            fromByteOffset: 4 * word, as: (@convention(c) (UnsafeRawPointer) -> Unmanaged<CFString>)?.self))
}

/// The run loop and mode a C caller passed, as Core Foundation's objects (borrowed).
private func loop(_ runLoop: UnsafeMutableRawPointer?, _ mode: UnsafeRawPointer?) -> (CFRunLoop, CFString)? {
    guard let runLoop, let mode else { return nil }
    return (Unmanaged<CFRunLoop>.fromOpaque(runLoop).takeUnretainedValue(),
            Unmanaged<CFString>.fromOpaque(mode).takeUnretainedValue())
}

/// `SCNetworkReachabilityScheduleWithRunLoop`.
@_cdecl("SCNetworkReachabilityScheduleWithRunLoop")
public func cScheduleWithRunLoop(
    _ target: UnsafeMutableRawPointer?, _ runLoop: UnsafeMutableRawPointer?, _ mode: UnsafeRawPointer?
) -> Bool {
    guard let reference = borrowed(target), let (loop, mode) = loop(runLoop, mode) else { return SCStatus.fail() }
    return SCNetworkReachabilityScheduleWithRunLoop(reference, loop, mode)
}

/// `SCNetworkReachabilityUnscheduleFromRunLoop`.
@_cdecl("SCNetworkReachabilityUnscheduleFromRunLoop")
public func cUnscheduleFromRunLoop(
    _ target: UnsafeMutableRawPointer?, _ runLoop: UnsafeMutableRawPointer?, _ mode: UnsafeRawPointer?
) -> Bool {
    guard let reference = borrowed(target), let (loop, mode) = loop(runLoop, mode) else { return SCStatus.fail() }
    return SCNetworkReachabilityUnscheduleFromRunLoop(reference, loop, mode)
}

/// `SCNetworkReachabilitySetDispatchQueue`: a `dispatch_queue_t`, or NULL to unschedule.
/// The queue is retained while the reference is scheduled on it, as Apple's is.
@_cdecl("SCNetworkReachabilitySetDispatchQueue")
public func cSetDispatchQueue(_ target: UnsafeMutableRawPointer?, _ queue: UnsafeMutableRawPointer?) -> Bool {
    guard let reference = borrowed(target) else { return SCStatus.fail() }
    guard let queue else { return reference.unschedule(queue: true, loop: nil) }
    let held = HeldQueue(queue)
    return reference.schedule(queue: .init { work in held.async(work) }, loop: nil)
}

/// A C dispatch queue, retained from scheduling until the reference lets it go.
/// `@unchecked Sendable`, proved: the pointer never changes, and libdispatch's calls on
/// a queue are thread-safe.
private final class HeldQueue: @unchecked Sendable {
    let queue: UnsafeMutableRawPointer
    init(_ queue: UnsafeMutableRawPointer) {
        self.queue = queue
        reachability_dispatch_retain(queue)
    }
    deinit { reachability_dispatch_release(queue) }

    /// Runs `work` on the queue (`dispatch_async_f`, the work passed as its context).
    func async(_ work: @escaping @Sendable () -> Void) {
        let context = Unmanaged.passRetained(Work(work)).toOpaque()
        reachability_dispatch_async_f(queue, context) { context in
            Unmanaged<Work>.fromOpaque(context!).takeRetainedValue().run()
        }
    }
}

private final class Work: Sendable {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}
