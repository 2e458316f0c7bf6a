import CoreFoundation
import Dispatch
import Foundation
import Glibc
import ReachabilityCore
import ReachabilityRuntime

// Apple's SCNetworkReachability API (SystemConfiguration.framework), with the
// Swift signatures Apple's SDK imports it with, on the runtime the
// `ReachabilitydClient` and `NetworkPath` products share: the daemon when it is on
// the system bus, else the same engine in this process. Behaviour follows configd's
// `SCNetworkReachability.c`; every place where Linux differs is in the DocC
// catalog (`SystemConfiguration.docc`, "Linux differences").

/// `SCNetworkReachabilityFlags`, bit for bit as Apple's; the same type as the
/// `ReachabilitydClient` product's (a value of one is a value of the other).
public typealias SCNetworkReachabilityFlags = ReachabilityCore.ReachabilityFlags

/// The function a reference calls with its flags: the reference, the flags, and
/// the context's `info` (retained through the context's `retain` for the call).
///
/// Apple's is `@convention(c)`, a C function pointer. Here it cannot be: the reference
/// is a Swift class and the flags a Swift structure, neither of which a C function
/// type may carry on Linux. It is a `@Sendable` Swift function, so the closures and
/// global functions Apple code passes (which capture nothing) are accepted unchanged;
/// `@preconcurrency`, so that in Swift 5 mode, where a global function is not yet
/// known to be Sendable, passing one compiles without a warning, as with Apple's.
@preconcurrency
public typealias SCNetworkReachabilityCallBack =
    @Sendable (_ target: SCNetworkReachability, _ flags: SCNetworkReachabilityFlags, _ info: UnsafeMutableRawPointer?)
    -> Void

/// What a callback is given, and how it is kept: Apple's structure, field for field.
/// `retain` runs on `info` when the context is set and around every callback;
/// `release` balances each `retain` (when the context is replaced, when the
/// reference goes away, and after each callback).
public struct SCNetworkReachabilityContext {
    /// Always 0.
    public var version: CFIndex
    /// Handed to the callback.
    public var info: UnsafeMutableRawPointer?
    /// Takes a reference to `info`, returning the pointer to use.
    public var retain: (@convention(c) (UnsafeRawPointer) -> UnsafeRawPointer)?
    /// Drops a reference `retain` took.
    public var release: (@convention(c) (UnsafeRawPointer) -> Void)?
    /// A description of `info`.
    public var copyDescription: (@convention(c) (UnsafeRawPointer) -> Unmanaged<CFString>)?

    public init() {
        self.init(version: 0, info: nil, retain: nil, release: nil, copyDescription: nil)
    }

    public init(version: CFIndex, info: UnsafeMutableRawPointer?,
                retain: (@convention(c) (UnsafeRawPointer) -> UnsafeRawPointer)?,
                release: (@convention(c) (UnsafeRawPointer) -> Void)?,
                copyDescription: (@convention(c) (UnsafeRawPointer) -> Unmanaged<CFString>)?) {
        self.version = version
        self.info = info
        self.retain = retain
        self.release = release
        self.copyDescription = copyDescription
    }
}

/// A handle on the reachability of one target: a host name, an address, or the
/// internet (the zero address). Apple's `SCNetworkReachability` (a Core
/// Foundation object there), made by `SCNetworkReachabilityCreateWithName`,
/// `…CreateWithAddress` or `…CreateWithAddressPair`.
///
/// While scheduled (on a dispatch queue or a run loop) the system holds a
/// reference to it, as Apple's does: it keeps calling back until unscheduled,
/// even if its creator dropped it.
///
/// An `NSObject`, which on Linux is a Core Foundation object: the C functions hand it
/// out as the `SCNetworkReachabilityRef` on which `CFRetain`, `CFRelease`,
/// `CFGetTypeID` and `CFCopyDescription` work, as on Apple's platforms.
public final class SCNetworkReachability: NSObject, Sendable {
    /// What the runtime watches for it.
    let key: FeedKey
    /// A name target (owes a callback once scheduled; read unscheduled without a lookup).
    let isName: Bool
    /// How the target was given, for `description`.
    private let name: String

    /// The reference's state, behind a lock ThreadSanitizer sees (the runtime's `Guarded`).
    private let state = Guarded(State())
    /// Held while the callback runs; unscheduling takes it once, so it returns only after
    /// a callback running on another thread has finished. Recursive: a callback may
    /// unschedule its own reference.
    let callout = NSRecursiveLock()

    struct State: Sendable {
        var callback: SCNetworkReachabilityCallBack?
        /// The context as set; `info` is the pointer `retain` returned.
        var context = Context(SCNetworkReachabilityContext())
        var queue: CalloutQueue?
        var runLoops: [ScheduledLoop] = []
        /// The runtime's subscription while scheduled.
        var subscription: Subscription<FeedKey>?
        /// The system's reference to this one while scheduled.
        var hold: Hold?
        var callouts = ReachabilityCallouts()
    }

    /// The caller's context, kept to be handed back. `@unchecked Sendable`, proved: the
    /// value is never changed once made, and this module never dereferences its
    /// pointers; it only passes `info` to the caller's own `retain`, `release` and
    /// callback, on the threads Apple's contract allows (any), as Apple's does.
    struct Context: @unchecked Sendable {
        let value: SCNetworkReachabilityContext
        init(_ value: SCNetworkReachabilityContext) { self.value = value }
    }

    /// The system's strong reference to a scheduled reference, emptied when it is unscheduled.
    final class Hold: Sendable {
        private let held: Guarded<SCNetworkReachability?>
        init(_ reference: SCNetworkReachability) { held = Guarded(reference) }
        var reference: SCNetworkReachability? {
            get { held.withLock { $0 } }
            set { held.withLock { $0 = newValue } }
        }
    }

    /// The dispatch queue a reference is scheduled on: a Swift `DispatchQueue`, or for the
    /// C functions a C `dispatch_queue_t` (which has no Swift `DispatchQueue` to stand for
    /// it on Linux); `async` hands it a callback, and is let go when unscheduled.
    package struct CalloutQueue: Sendable {
        let async: @Sendable (@escaping @Sendable () -> Void) -> Void
        package init(async: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void) { self.async = async }
        init(_ queue: DispatchQueue) { async = { queue.async(execute: $0) } }
    }

    /// A Core Foundation run loop and mode the reference is scheduled in, with a run loop
    /// source of its own in that mode while it is: as with Apple's, a run loop that has
    /// nothing else keeps running (`CFRunLoopRun()` does not return) while a reference is
    /// scheduled on it. The callbacks themselves are blocks performed there. `@unchecked
    /// Sendable`, proved: off the run loop's own thread only thread-safe Core Foundation
    /// calls are made (`CFRunLoopAddSource`, `CFRunLoopPerformBlock`, `CFRunLoopWakeUp`,
    /// `CFRunLoopSourceInvalidate` take the run loop's lock), and nothing here changes.
    final class ScheduledLoop: @unchecked Sendable {
        let loop: CFRunLoop
        let mode: CFString
        private let source: CFRunLoopSource

        init(loop: CFRunLoop, mode: CFString) {
            self.loop = loop
            self.mode = mode
            var context = CFRunLoopSourceContext(
                version: 0, info: nil, retain: nil, release: nil, copyDescription: nil, equal: nil, hash: nil,
                schedule: nil, cancel: nil, perform: { _ in })
            source = CFRunLoopSourceCreate(nil, 0, &context)
            CFRunLoopAddSource(loop, source, mode)
        }

        /// Taken off the run loop when the reference is unscheduled from it.
        deinit { CFRunLoopSourceInvalidate(source) }

        func isSame(_ other: (CFRunLoop, CFString)) -> Bool { loop === other.0 && CFEqual(mode, other.1) }
    }

    init(key: FeedKey, isName: Bool, name: String) {
        self.key = key
        self.isName = isName
        self.name = name
        super.init()
    }

    deinit {
        let context = withState { $0.context }.value
        if let release = context.release, let info = context.info { release(info) }
    }

    public override var description: String {
        let address = name.isEmpty ? TargetDescription<String>.internetAddress : name
        let target = isName ? "name = \(name)" : "address = \(address)"
        return "<SCNetworkReachability \(Unmanaged.passUnretained(self).toOpaque())> {\(target)}"
    }

    /// `REACHABILITY_MODE=daemon` or `in-process` forces where answers come from (a Linux
    /// addition: Apple's functions take no such argument); unset, the daemon when it is on
    /// the system bus, else in-process (chosen once per process, when first needed).
    static let requestedMode: ReachabilityMode? =
        getenv("REACHABILITY_MODE").flatMap { ReachabilityMode(rawValue: String(cString: $0)) }

    func withState<T: Sendable>(_ body: (inout State) -> T) -> T {
        state.withLock(body)
    }

    // MARK: Flags

    /// Apple's `GetFlags`: scheduled, the latest answer (which settles the callback a
    /// name target owes); unscheduled, a fresh answer, for a name without a lookup
    /// (the internet's, as Apple's one-shot path evaluation of a host endpoint).
    func flags() -> SCNetworkReachabilityFlags {
        let scheduled: (Bool, SCNetworkReachabilityFlags?, Int?) = withState { state in
            if let flags = state.callouts.flags { state.callouts.read(flags) }
            return (state.subscription != nil, state.callouts.flags, state.subscription?.id)
        }
        if let known = scheduled.1 { return known }
        let key = self.key.readWithoutLookup
        let answer = Runtime.wait { runtime, done in runtime.query(key, mode: Self.requestedMode) { done($0) } }
        let flags = (try? answer.get().flags ?? nil) ?? []
        guard scheduled.0 else { return flags }
        return withState { state in
            guard state.subscription?.id == scheduled.2 else { return flags }
            // An answer that came meanwhile (and was, or is being, called back) is newer than this one.
            if let newer = state.callouts.flags { return newer }
            state.callouts.read(flags)
            return flags
        }
    }
}
