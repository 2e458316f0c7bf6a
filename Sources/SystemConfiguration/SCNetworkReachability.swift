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
    /// A description of `info`. A Swift function here (Apple's is a C function): a
    /// function returning `Unmanaged<CFString>` cannot be `@convention(c)` on Linux.
    public var copyDescription: ((UnsafeRawPointer) -> Unmanaged<CFString>)?

    public init() {
        self.init(version: 0, info: nil, retain: nil, release: nil, copyDescription: nil)
    }

    public init(version: CFIndex, info: UnsafeMutableRawPointer?,
                retain: (@convention(c) (UnsafeRawPointer) -> UnsafeRawPointer)?,
                release: (@convention(c) (UnsafeRawPointer) -> Void)?,
                copyDescription: ((UnsafeRawPointer) -> Unmanaged<CFString>)?) {
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
public final class SCNetworkReachability: Sendable, CustomStringConvertible {
    /// What the runtime watches for it.
    let key: FeedKey
    /// A name target (owes a callback once scheduled; read unscheduled without a lookup).
    let isName: Bool
    /// How the target was given, for `description`.
    private let name: String
    /// Where answers come from, chosen when first needed.
    private let choice: ModeChoice

    /// The reference's state, behind a lock ThreadSanitizer sees (the runtime's `Guarded`).
    private let state = Guarded(State())
    /// Held while the callback runs; unscheduling takes it once, so it returns only after
    /// a callback running on another thread has finished. Recursive: a callback may
    /// unschedule its own reference.
    private let callout = NSRecursiveLock()

    private struct State: Sendable {
        var callback: SCNetworkReachabilityCallBack?
        /// The context as set; `info` is the pointer `retain` returned.
        var context = Context(SCNetworkReachabilityContext())
        var queue: DispatchQueue?
        var runLoops: [ScheduledLoop] = []
        /// The runtime's subscription while scheduled.
        var subscription: Int?
        /// The system's reference to this one while scheduled.
        var hold: Hold?
        var callouts = ReachabilityCallouts()
    }

    /// The caller's context, kept to be handed back. `@unchecked Sendable`, proved: the
    /// value is never changed once made, and this module never dereferences its
    /// pointers; it only passes `info` to the caller's own `retain`, `release` and
    /// callback, on the threads Apple's contract allows (any), as Apple's does.
    private struct Context: @unchecked Sendable {
        let value: SCNetworkReachabilityContext
        init(_ value: SCNetworkReachabilityContext) { self.value = value }
    }

    /// The system's strong reference to a scheduled reference, emptied when it is unscheduled.
    private final class Hold: Sendable {
        private let held: Guarded<SCNetworkReachability?>
        init(_ reference: SCNetworkReachability) { held = Guarded(reference) }
        var reference: SCNetworkReachability? {
            get { held.withLock { $0 } }
            set { held.withLock { $0 = newValue } }
        }
    }

    /// A run loop and mode the reference is scheduled in. `@unchecked Sendable`, proved:
    /// off the run loop's own thread only `add(_:forMode:)` is called on it, which is
    /// thread-safe (Core Foundation's `CFRunLoopAddTimer` takes the run loop's lock),
    /// and the identity comparison reads nothing of it.
    private struct ScheduledLoop: @unchecked Sendable {
        let loop: RunLoop
        let mode: RunLoop.Mode
        func isSame(_ other: (RunLoop, RunLoop.Mode)) -> Bool { loop === other.0 && mode == other.1 }
    }

    init(key: FeedKey, isName: Bool, name: String) {
        self.key = key
        self.isName = isName
        self.name = name
        choice = ModeChoice(requested: Self.requestedMode)
    }

    deinit {
        let context = withState { $0.context }.value
        if let release = context.release, let info = context.info { release(info) }
    }

    public var description: String {
        let target = isName ? "name = \(name)" : "address = \(name.isEmpty ? "0.0.0.0" : name)"
        return "<SCNetworkReachability \(Unmanaged.passUnretained(self).toOpaque())> {\(target)}"
    }

    /// `REACHABILITY_MODE=daemon` or `in-process` forces where answers come from (a Linux
    /// addition: Apple's functions take no such argument); unset, the daemon when it is on
    /// the system bus, else in-process.
    private static let requestedMode: ReachabilityMode? =
        getenv("REACHABILITY_MODE").flatMap { ReachabilityMode(rawValue: String(cString: $0)) }

    private func withState<T: Sendable>(_ body: (inout State) -> T) -> T {
        state.withLock(body)
    }

    // MARK: Callback

    func setCallback(_ callback: SCNetworkReachabilityCallBack?, _ context: SCNetworkReachabilityContext?) {
        var new = context ?? SCNetworkReachabilityContext()
        if let retain = new.retain, let info = new.info { new.info = UnsafeMutableRawPointer(mutating: retain(info)) }
        let old = withState { state in
            defer {
                state.callback = callback
                state.context = Context(new)
            }
            return state.context
        }.value
        if let release = old.release, let info = old.info { release(info) }
        // A callback already running on another thread finishes before this returns.
        callout.lock()
        callout.unlock()
    }

    // MARK: Scheduling

    /// Starts delivering to `queue` or to run loops (`loop`); fails when already scheduled
    /// on a queue, or on run loops when `queue` is given.
    func schedule(queue: DispatchQueue?, loop: (RunLoop, RunLoop.Mode)?) -> Bool {
        let id = Runtime.newID()
        // The system holds this reference while it is scheduled, as Apple's does: through
        // `hold`, which unscheduling empties at once (the runtime lets the subscription go
        // later, on its own thread).
        let hold = Hold(self)
        let outcome: Bool? = withState { state in
            if state.subscription != nil {
                // Another run loop for a reference scheduled on run loops is fine; anything else is not.
                guard state.queue == nil, let loop, !state.runLoops.isEmpty else { return false }
                if !state.runLoops.contains(where: { $0.isSame(loop) }) {
                    state.runLoops.append(ScheduledLoop(loop: loop.0, mode: loop.1))
                }
                return true
            }
            state.queue = queue
            state.runLoops = loop.map { [ScheduledLoop(loop: $0.0, mode: $0.1)] } ?? []
            state.subscription = id
            state.hold = hold
            state.callouts.scheduled(isName: isName)
            return nil
        }
        if let outcome { return outcome || SCStatus.fail() }
        let subscriber = Subscriber(
            receive: { state in hold.reference?.received(state.flags, subscription: id) },
            fail: { _ in hold.reference?.received([], subscription: id) })
        let (key, choice) = (self.key, self.choice)
        Runtime.send { runtime in
            runtime.subscribe(id, key: key, choice: choice, subscriber) { error in
                // A watch that cannot be set up (no way to watch the network, the daemon's
                // limit reached) answers "not reachable".
                if error != nil { hold.reference?.received([], subscription: id) }
            }
        }
        return true
    }

    /// Stops delivering. With `loop`, only to that run loop and mode (the reference stays
    /// scheduled while another remains). Returns once no callback runs on another thread.
    func unschedule(queue: Bool, loop: (RunLoop, RunLoop.Mode)?) -> Bool {
        let ended: Int?? = withState { state in
            guard let id = state.subscription, (state.queue != nil) == queue else { return nil }
            if let loop {
                state.runLoops.removeAll { $0.isSame(loop) }
                guard state.runLoops.isEmpty else { return .some(nil) }
            }
            state.subscription = nil
            state.queue = nil
            state.runLoops = []
            state.callouts.unscheduled()
            state.hold?.reference = nil
            state.hold = nil
            return id
        }
        guard let ended else { return SCStatus.fail() }
        if let id = ended {
            Runtime.send { runtime in runtime.unsubscribe(id) }
            callout.lock()
            callout.unlock()
        }
        return true
    }

    /// An answer from the runtime (on its thread): decides, and hands the callback to the
    /// queue or run loop. Unknown (`nil`: the daemon left, a lookup in flight) is no answer.
    private func received(_ flags: SCNetworkReachabilityFlags?, subscription id: Int) {
        guard let flags else { return }
        let target: (DispatchQueue?, ScheduledLoop?)? = withState { state in
            guard state.subscription == id, state.callouts.received(flags) else { return nil }
            return (state.queue, state.runLoops.first)
        }
        switch target {
        case (let queue?, _)?:
            queue.async { self.perform(flags, subscription: id) }
        case (nil, let scheduled?)?:
            // A timer due now: adding it wakes the run loop, which runs it in that mode.
            let timer = Timer(timeInterval: 0, repeats: false) { _ in self.perform(flags, subscription: id) }
            scheduled.loop.add(timer, forMode: scheduled.mode)
        default:
            break
        }
    }

    /// Runs the callback, unless the reference was unscheduled (or scheduled anew) meanwhile.
    private func perform(_ flags: SCNetworkReachabilityFlags, subscription id: Int) {
        callout.lock()
        defer { callout.unlock() }
        guard let (callback, context) = withState({ state in
            state.subscription == id ? state.callback.map { ($0, state.context) } : nil
        }) else { return }
        let value = context.value
        var info = value.info
        if let retain = value.retain, let original = info { info = UnsafeMutableRawPointer(mutating: retain(original)) }
        callback(self, flags, info)
        if let release = value.release, let info { release(info) }
    }

    // MARK: Flags

    /// Apple's `GetFlags`: scheduled, the latest answer (which settles the callback a
    /// name target owes); unscheduled, a fresh answer, for a name without a lookup
    /// (the internet's, as Apple's one-shot path evaluation of a host endpoint).
    func flags() -> SCNetworkReachabilityFlags {
        let scheduled: (Bool, SCNetworkReachabilityFlags?, Int?) = withState { state in
            if let flags = state.callouts.flags { state.callouts.read(flags) }
            return (state.subscription != nil, state.callouts.flags, state.subscription)
        }
        if let known = scheduled.1 { return known }
        let key = self.key.readWithoutLookup
        let choice = self.choice
        let answer = Runtime.wait { runtime, done in runtime.query(key, choice: choice) { done($0) } }
        let flags = (try? answer.get().flags ?? nil) ?? []
        guard scheduled.0 else { return flags }
        return withState { state in
            guard state.subscription == scheduled.2 else { return flags }
            // An answer that came meanwhile (and was, or is being, called back) is newer than this one.
            if let newer = state.callouts.flags { return newer }
            state.callouts.read(flags)
            return flags
        }
    }
}

// MARK: - Apple's functions

/// A reference for the host `nodename`, or `nil` (with `SCError()` set) when the
/// name is empty. Any other string is taken, as Apple takes it: an address literal
/// is watched as that address; a string no lookup can succeed for (`"https://…"`)
/// is not reachable. `allocator` must be `nil`.
public func SCNetworkReachabilityCreateWithName(_ allocator: CFAllocator?, _ nodename: UnsafePointer<CChar>)
    -> SCNetworkReachability?
{
    let name = String(cString: nodename)
    let target = ReachabilityTarget(name)
    guard let key = target.anyNameKey() else {
        SCStatus.fail()
        return nil
    }
    let isName = if case .input(.address) = key { false } else { true }
    return SCNetworkReachability(key: key, isName: isName, name: name)
}

/// A reference for `address` (an IPv4 or IPv6 socket address; the zero address of
/// either family is the internet), or `nil` (with `SCError()` set) for another
/// family. On Linux the structure's length is implied by its family. `allocator`
/// must be `nil`.
public func SCNetworkReachabilityCreateWithAddress(_ allocator: CFAllocator?, _ address: UnsafePointer<sockaddr>)
    -> SCNetworkReachability?
{
    guard let text = addressText(address) else {
        SCStatus.fail()
        return nil
    }
    return makeAddressReference(text)
}

/// A reference for a pair of addresses, either of which may be `nil` (not both): the
/// kernel's route from the local address to the remote one; with only a remote
/// address, that address's reachability; with only a local one, reachable and local
/// while it is configured on a link that can carry packets. `allocator` must be `nil`.
public func SCNetworkReachabilityCreateWithAddressPair(
    _ allocator: CFAllocator?, _ localAddress: UnsafePointer<sockaddr>?, _ remoteAddress: UnsafePointer<sockaddr>?
) -> SCNetworkReachability? {
    let local = localAddress.map(addressText)
    let remote = remoteAddress.map(addressText)
    guard local != nil || remote != nil, local != .some(nil), remote != .some(nil) else {
        SCStatus.fail()
        return nil
    }
    // The zero address ("") stands for no address on its side; two of them, for the internet.
    let (localText, remoteText) = ((local ?? nil) ?? "", (remote ?? nil) ?? "")
    // Without a local address it is the remote address's reference (the internet's for two zeros).
    if localText.isEmpty { return makeAddressReference(remoteText) }
    let target = ReachabilityTarget.addressPair(local: localText, remote: remoteText)
    guard let key = target.anyNameKey() else {
        SCStatus.fail()
        return nil
    }
    return SCNetworkReachability(key: key, isName: false, name: target.description)
}

private func makeAddressReference(_ text: String) -> SCNetworkReachability? {
    if text.isEmpty { return SCNetworkReachability(key: .internet, isName: false, name: "") }
    guard let key = ReachabilityTarget.address(text).anyNameKey() else {
        SCStatus.fail()
        return nil
    }
    return SCNetworkReachability(key: key, isName: false, name: text)
}

/// The target's flags into `flags`. Scheduled: the latest answer. Not scheduled: a
/// fresh one; for a name, without a lookup (the internet's, as Apple's). The calling
/// thread waits for that answer (the runtime runs on a thread of its own).
@discardableResult
public func SCNetworkReachabilityGetFlags(
    _ target: SCNetworkReachability, _ flags: UnsafeMutablePointer<SCNetworkReachabilityFlags>
) -> Bool {
    flags.pointee = target.flags()
    return true
}

/// Sets (or, with `nil`, clears) the callback and its context. The context's
/// `retain` runs on its `info` now, the previous context's `release` on its own.
/// After it returns, the previous callback no longer runs. `@preconcurrency`, as the
/// callback's type: a Swift 5 program passes a global function without a warning.
@preconcurrency @discardableResult
public func SCNetworkReachabilitySetCallback(
    _ target: SCNetworkReachability, _ callout: SCNetworkReachabilityCallBack?,
    _ context: UnsafeMutablePointer<SCNetworkReachabilityContext>?
) -> Bool {
    target.setCallback(callout, context?.pointee)
    return true
}

/// Schedules the callback on `queue`, or with `nil` unschedules it (after which no
/// callback runs). A name target calls back once its name is looked up, then on
/// each change of flags; an address, on each change only.
@discardableResult
public func SCNetworkReachabilitySetDispatchQueue(_ target: SCNetworkReachability, _ queue: DispatchQueue?) -> Bool {
    if let queue { return target.schedule(queue: queue, loop: nil) }
    return target.unschedule(queue: true, loop: nil)
}

/// Schedules the callback on `runLoop` in `runLoopMode` (Foundation's `RunLoop`
/// standing for `CFRunLoop`): it runs when that run loop runs in that mode.
@discardableResult
public func SCNetworkReachabilityScheduleWithRunLoop(
    _ target: SCNetworkReachability, _ runLoop: CFRunLoop, _ runLoopMode: CFRunLoopMode
) -> Bool {
    target.schedule(queue: nil, loop: (runLoop, runLoopMode))
}

/// `SCNetworkReachabilityScheduleWithRunLoop` with the mode's name
/// (`CFRunLoopMode.defaultMode.rawValue`, as Apple code passes it).
@discardableResult
public func SCNetworkReachabilityScheduleWithRunLoop(
    _ target: SCNetworkReachability, _ runLoop: CFRunLoop, _ runLoopMode: String
) -> Bool {
    SCNetworkReachabilityScheduleWithRunLoop(target, runLoop, RunLoop.Mode(runLoopMode))
}

/// Stops calling back on `runLoop` in `runLoopMode`; once no run loop remains the
/// reference is unscheduled, and no callback runs after this returns.
@discardableResult
public func SCNetworkReachabilityUnscheduleFromRunLoop(
    _ target: SCNetworkReachability, _ runLoop: CFRunLoop, _ runLoopMode: CFRunLoopMode
) -> Bool {
    target.unschedule(queue: false, loop: (runLoop, runLoopMode))
}

/// `SCNetworkReachabilityUnscheduleFromRunLoop` with the mode's name.
@discardableResult
public func SCNetworkReachabilityUnscheduleFromRunLoop(
    _ target: SCNetworkReachability, _ runLoop: CFRunLoop, _ runLoopMode: String
) -> Bool {
    SCNetworkReachabilityUnscheduleFromRunLoop(target, runLoop, RunLoop.Mode(runLoopMode))
}
