import CoreFoundation
import Dispatch
import Foundation
import Glibc
import ReachabilityRuntime

// Apple's SCNetworkReachability functions, with the Swift signatures Apple's SDK imports
// them with: each makes a reference or hands the call to it.

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
    let isName = if case .input(let input) = key { input.isName } else { true }
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
    if let queue { return target.schedule(queue: .init(queue), loop: nil) }
    return target.unschedule(queue: true, loop: nil)
}

/// Schedules the callback on `runLoop` in `runLoopMode` (Core Foundation's; Apple code
/// passes `CFRunLoopMode.defaultMode.rawValue`): it runs when that run loop runs in
/// that mode (`CFRunLoopRun()`, or Foundation's `RunLoop.run(mode:before:)` for it).
@discardableResult
public func SCNetworkReachabilityScheduleWithRunLoop(
    _ target: SCNetworkReachability, _ runLoop: CFRunLoop, _ runLoopMode: CFString
) -> Bool {
    target.schedule(queue: nil, loop: (runLoop, runLoopMode))
}

/// Stops calling back on `runLoop` in `runLoopMode`; once no run loop remains the
/// reference is unscheduled, and no callback runs after this returns.
@discardableResult
public func SCNetworkReachabilityUnscheduleFromRunLoop(
    _ target: SCNetworkReachability, _ runLoop: CFRunLoop, _ runLoopMode: CFString
) -> Bool {
    target.unschedule(queue: false, loop: (runLoop, runLoopMode))
}
