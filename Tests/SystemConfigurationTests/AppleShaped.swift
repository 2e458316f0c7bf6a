// Code in the shapes real programs written for Apple's SystemConfiguration have,
// with the one import they have there: `import SystemConfiguration` brings the
// socket types and Dispatch, as Apple's brings Darwin and Dispatch. This file must
// import nothing else (the tests that use it are in AppleShapedTests.swift).
import SystemConfiguration

/// "Is the network up?" as many apps write it: the zero address built with Apple's
/// memberwise initialiser (length byte first), its length set, and the flags tested
/// with the old `kSCNetworkFlags…` names.
func isConnectedToNetwork() -> Bool? {
    var zeroAddress = sockaddr_in(
        sin_len: 0, sin_family: 0, sin_port: 0, sin_addr: in_addr(s_addr: 0), sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
    zeroAddress.sin_len = UInt8(MemoryLayout.size(ofValue: zeroAddress))
    zeroAddress.sin_family = sa_family_t(AF_INET)
    let defaultRoute = withUnsafePointer(to: &zeroAddress) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SCNetworkReachabilityCreateWithAddress(nil, $0) }
    }
    guard let defaultRoute else { return nil }
    var flags = SCNetworkReachabilityFlags(rawValue: 0)
    guard SCNetworkReachabilityGetFlags(defaultRoute, &flags) else { return nil }
    let isReachable = (flags.rawValue & UInt32(kSCNetworkFlagsReachable)) != 0
    let needsConnection = (flags.rawValue & UInt32(kSCNetworkFlagsConnectionRequired)) != 0
    return isReachable && !needsConnection
}

/// An address given as Apple code builds one: `sockaddr_in(sin_len:…)` for IPv4,
/// `sockaddr_in6(sin6_len:…)` for IPv6, port in network order.
func reference(forLoopback family: Int32) -> SCNetworkReachability? {
    if family == AF_INET6 {
        var address = sockaddr_in6(
            sin6_len: UInt8(MemoryLayout<sockaddr_in6>.size), sin6_family: sa_family_t(AF_INET6),
            sin6_port: in_port_t(443).bigEndian, sin6_flowinfo: 0, sin6_addr: in6addr_loopback, sin6_scope_id: 0)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SCNetworkReachabilityCreateWithAddress(nil, $0) }
        }
    }
    var address = sockaddr_in(
        sin_len: UInt8(MemoryLayout<sockaddr_in>.size), sin_family: sa_family_t(AF_INET),
        sin_port: in_port_t(443).bigEndian, sin_addr: in_addr(s_addr: in_addr_t(0x7f00_0001).bigEndian),
        sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SCNetworkReachabilityCreateWithAddress(nil, $0) }
    }
}

/// A watcher as apps write one: a reference for a host, a serial `DispatchQueue` of its
/// own, the callback handed the watcher through the context's `info`, and a semaphore
/// the caller waits on. `@unchecked Sendable`: `heard` is touched only on `queue`.
final class QueueWatcher: @unchecked Sendable {
    let reference: SCNetworkReachability
    let queue = DispatchQueue(label: "watcher")
    let changed = DispatchSemaphore(value: 0)
    private(set) var heard: [SCNetworkReachabilityFlags] = []

    init?(host: String) {
        guard let reference = SCNetworkReachabilityCreateWithName(nil, host) else { return nil }
        self.reference = reference
    }

    func start() -> Bool {
        var context = SCNetworkReachabilityContext(
            version: 0, info: nil, retain: nil, release: nil, copyDescription: nil)
        context.info = Unmanaged.passUnretained(self).toOpaque()
        let callback: SCNetworkReachabilityCallBack = { _, flags, info in
            guard let info else { return }
            let watcher = Unmanaged<QueueWatcher>.fromOpaque(info).takeUnretainedValue()
            watcher.heard.append(flags)
            watcher.changed.signal()
        }
        return SCNetworkReachabilitySetCallback(reference, callback, &context)
            && SCNetworkReachabilitySetDispatchQueue(reference, queue)
    }

    /// What the callback heard so far, read on the watcher's queue.
    var flagsHeard: [SCNetworkReachabilityFlags] { queue.sync { heard } }

    func stop() {
        SCNetworkReachabilitySetDispatchQueue(reference, nil)
        SCNetworkReachabilitySetCallback(reference, nil, nil)
    }
}
