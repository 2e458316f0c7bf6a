// What `import SystemConfiguration` brings on Apple's platforms besides the
// framework's own names: Darwin (through CoreFoundation) and Dispatch. Code written
// for Apple uses `sockaddr_in`, `AF_INET` and `DispatchQueue` with no other import,
// so this module re-exports their Linux homes, Glibc and Dispatch.
//
// Not Foundation: Apple's framework brings CoreFoundation, not Foundation, so code
// that uses Foundation names imports Foundation there too. Re-exporting it here would
// let code compile on Linux that does not on Apple's platforms, and would put all of
// Foundation's names in scope for every user of this module. CoreFoundation, the
// toolchain's, is re-exported in `CoreFoundation.swift`.
@_exported import Dispatch
@_exported import Glibc
