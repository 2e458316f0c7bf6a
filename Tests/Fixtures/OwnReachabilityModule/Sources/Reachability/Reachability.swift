// This package's own `Reachability` module, on Apple's SCNetworkReachability
// functions: on Apple platforms the system's, on Linux reachabilityd's.
import Dispatch
import SystemConfiguration

#if canImport(Glibc)
import Glibc
#endif

/// The reachability of the internet (the zero address) or of a host name.
public final class Reachability: Sendable {
    private let reference: SCNetworkReachability

    /// The internet.
    public init?() {
        var zeroAddress = sockaddr_in()
        zeroAddress.sin_len = UInt8(MemoryLayout<sockaddr_in>.size)
        zeroAddress.sin_family = sa_family_t(AF_INET)
        let made = withUnsafePointer(to: &zeroAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SCNetworkReachabilityCreateWithAddress(nil, $0) }
        }
        guard let made else { return nil }
        reference = made
    }

    public init?(hostname: String) {
        guard let made = SCNetworkReachabilityCreateWithName(nil, hostname) else { return nil }
        reference = made
    }

    /// The flags now, in Apple's bits.
    public var flags: UInt32 {
        var flags = SCNetworkReachabilityFlags()
        return SCNetworkReachabilityGetFlags(reference, &flags) ? flags.rawValue : 0
    }
}
