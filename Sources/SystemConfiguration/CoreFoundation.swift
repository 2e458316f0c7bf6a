import Foundation

// The few Core Foundation names Apple's SCNetworkReachability signatures are
// spelled with. Foundation on Linux does not export Core Foundation, so code
// written for Apple ("cannot find type 'CFString' in scope") compiles here
// only if this module declares them. Each is what stands for Apple's type on
// Linux; none is Core Foundation itself.

/// Core Foundation's index and count type (`CFIndex`, a signed word), as in the
/// context's `version`.
public typealias CFIndex = Int

/// Apple's `CFString`, toll-free bridged there with `NSString`: here it is
/// Foundation's `NSString`. A context's `copyDescription` returns
/// `Unmanaged.passRetained("…" as NSString)` where Apple code returns a
/// `CFString` it created.
public typealias CFString = NSString

/// Stands for Apple's `CFAllocator`. The functions that take one accept only
/// `nil` (the default allocator), which is what Apple code passes; no value of
/// this type can be made.
public final class CFAllocator: Sendable {
    private init() {}
}

/// Apple's `CFRunLoop`: here Foundation's `RunLoop`.
public typealias CFRunLoop = RunLoop

/// Apple's `CFRunLoopMode`: here Foundation's `RunLoop.Mode` (`.defaultMode`,
/// `.commonModes`, as Apple's Swift overlay names them).
public typealias CFRunLoopMode = RunLoop.Mode

/// The current thread's run loop (Apple's `CFRunLoopGetCurrent()`).
public func CFRunLoopGetCurrent() -> CFRunLoop { RunLoop.current }

/// The main thread's run loop (Apple's `CFRunLoopGetMain()`).
public func CFRunLoopGetMain() -> CFRunLoop { RunLoop.main }

extension RunLoop.Mode {
    /// Apple's `CFRunLoopMode.defaultMode` (Foundation's `.default`).
    public static var defaultMode: RunLoop.Mode { .default }
    /// Apple's `CFRunLoopMode.commonModes` (Foundation's `.common`).
    public static var commonModes: RunLoop.Mode { .common }
}

/// Apple's `kCFRunLoopDefaultMode`.
public var kCFRunLoopDefaultMode: CFRunLoopMode { .default }
/// Apple's `kCFRunLoopCommonModes`.
public var kCFRunLoopCommonModes: CFRunLoopMode { .common }
