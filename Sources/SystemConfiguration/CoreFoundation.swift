@_exported import CoreFoundation

// Apple's SystemConfiguration brings Core Foundation, and so does this module: the
// toolchain's own `CoreFoundation` (the one inside Foundation on Linux), so
// `CFString`, `CFRunLoop`, `CFRunLoopMode`, `CFAllocator`, `CFRunLoopGetMain()` and
// `kCFRunLoopDefaultMode` are its types and functions, and a file that also says
// `import CoreFoundation` sees one of each.
//
// What Apple's Swift overlay adds and Linux's Core Foundation lacks: there,
// `CFRunLoopMode` is a structure wrapping the mode's `CFString` (`.defaultMode`,
// `.commonModes`, `.rawValue`); here it is `CFString` itself. These members let
// `CFRunLoopMode.defaultMode.rawValue`, as Apple code passes it, compile unchanged.
extension CFString {
    /// Apple's `CFRunLoopMode.defaultMode`: `kCFRunLoopDefaultMode`.
    public static var defaultMode: CFRunLoopMode { kCFRunLoopDefaultMode }
    /// Apple's `CFRunLoopMode.commonModes`: `kCFRunLoopCommonModes`.
    public static var commonModes: CFRunLoopMode { kCFRunLoopCommonModes }
    /// Apple's `CFRunLoopMode.rawValue`: the mode's name, which on Linux is the mode itself.
    public var rawValue: CFString { self }
}
