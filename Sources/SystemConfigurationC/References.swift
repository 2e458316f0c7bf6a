import CoreFoundation
import Glibc
import SystemConfiguration

// Apple's SCNetworkReachability C functions (<SystemConfiguration/SystemConfiguration.h>),
// exported with their C names from this library. Each translates C values into the
// `SystemConfiguration` module's and calls its Swift function of the same name: the
// behaviour is that module's, decided once.
//
// A reference (`SCNetworkReachabilityRef`) is the module's `SCNetworkReachability`
// object itself: on Linux a Swift object is a Core Foundation object too, so
// `CFRetain` and `CFRelease` work on it (the last release frees it). The create
// functions return it retained once, as Apple's ("Create" rule).

/// The C reference for a Swift one, +1.
func retained(_ reference: SCNetworkReachability?) -> UnsafeMutableRawPointer? {
    reference.map { Unmanaged.passRetained($0).toOpaque() }
}

/// The Swift reference behind a C one (borrowed); `nil` for NULL.
func borrowed(_ reference: UnsafeMutableRawPointer?) -> SCNetworkReachability? {
    reference.map { Unmanaged<SCNetworkReachability>.fromOpaque($0).takeUnretainedValue() }
}

/// `SCNetworkReachabilityCreateWithName`. Any allocator is taken (only the default
/// one exists here); NULL `nodename` fails with kSCStatusInvalidArgument.
@_cdecl("SCNetworkReachabilityCreateWithName")
public func cCreateWithName(_ allocator: UnsafeRawPointer?, _ nodename: UnsafePointer<CChar>?)
    -> UnsafeMutableRawPointer?
{
    guard let nodename else {
        SCStatus.fail()
        return nil
    }
    return retained(SCNetworkReachabilityCreateWithName(nil, nodename))
}

/// `SCNetworkReachabilityCreateWithAddress`.
@_cdecl("SCNetworkReachabilityCreateWithAddress")
public func cCreateWithAddress(_ allocator: UnsafeRawPointer?, _ address: UnsafePointer<sockaddr>?)
    -> UnsafeMutableRawPointer?
{
    guard let address else {
        SCStatus.fail()
        return nil
    }
    return retained(SCNetworkReachabilityCreateWithAddress(nil, address))
}

/// `SCNetworkReachabilityCreateWithAddressPair`.
@_cdecl("SCNetworkReachabilityCreateWithAddressPair")
public func cCreateWithAddressPair(
    _ allocator: UnsafeRawPointer?, _ local: UnsafePointer<sockaddr>?, _ remote: UnsafePointer<sockaddr>?
) -> UnsafeMutableRawPointer? {
    retained(SCNetworkReachabilityCreateWithAddressPair(nil, local, remote))
}

/// `SCNetworkReachabilityGetFlags`: false (kSCStatusInvalidArgument) for NULL arguments.
@_cdecl("SCNetworkReachabilityGetFlags")
public func cGetFlags(_ target: UnsafeMutableRawPointer?, _ flags: UnsafeMutablePointer<UInt32>?) -> Bool {
    guard let reference = borrowed(target), let flags else { return SCStatus.fail() }
    var value: SCNetworkReachabilityFlags = []
    guard SCNetworkReachabilityGetFlags(reference, &value) else { return false }
    flags.pointee = value.rawValue
    return true
}

/// `SCNetworkReachabilityGetTypeID`: the type Core Foundation reports for a reference
/// (`CFGetTypeID(reference) == SCNetworkReachabilityGetTypeID()`). On Linux a Swift
/// object has no registered Core Foundation type, so this is the value Core Foundation
/// gives every such object (`_kCFRuntimeNotATypeID`, 0): it tells a reference from a
/// `CFString` or `CFRunLoop`, not from other Swift objects.
@_cdecl("SCNetworkReachabilityGetTypeID")
public func cGetTypeID() -> UInt {
    typeID
}

private let typeID: UInt = {
    guard let probe = SCNetworkReachabilityCreateWithName(nil, "localhost") else { return 0 }
    return UInt(CFGetTypeID(probe))
}()

/// `SCError`: the calling thread's status of the last call that failed.
@_cdecl("SCError")
public func cSCError() -> Int32 {
    SCError()
}

/// `SCErrorString`: the text of a status (static storage, never freed).
@_cdecl("SCErrorString")
public func cSCErrorString(_ status: Int32) -> UnsafePointer<CChar> {
    SCErrorString(status)
}
