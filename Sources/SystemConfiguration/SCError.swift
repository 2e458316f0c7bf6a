import CoreFoundation
import Foundation

// Apple's per-thread status of the last SystemConfiguration call that failed
// (`SCError()`), with its codes and their text (`SCErrorString`).

/// Success.
public let kSCStatusOK: Int32 = 0
/// A failure with no better code.
public let kSCStatusFailed: Int32 = 1001
/// An argument was not valid (a `nil` or empty name, an address of no IP family,
/// a reference scheduled twice, an unscheduling of one not scheduled).
public let kSCStatusInvalidArgument: Int32 = 1002

/// The status of the last SystemConfiguration call on this thread that failed
/// (`kSCStatusOK` if none did).
public func SCError() -> Int32 {
    (Thread.current.threadDictionary[SCStatus.key] as? Int32) ?? kSCStatusOK
}

/// A description of `status`, as Apple's: a C string that lives as long as the program.
public func SCErrorString(_ status: Int32) -> UnsafePointer<CChar> {
    let text: StaticString =
        switch status {
        case kSCStatusOK: "Success!"
        case kSCStatusFailed: "Failed!"
        case kSCStatusInvalidArgument: "Invalid argument"
        default: "Unknown error"
        }
    return UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
}

package enum SCStatus {
    static let key = "io.github.reachabilityd.SCError"

    /// Records `status` as this thread's last error; returns `false` for the caller to return.
    @discardableResult
    package static func fail(_ status: Int32 = kSCStatusInvalidArgument) -> Bool {
        Thread.current.threadDictionary[key] = status
        return false
    }
}
