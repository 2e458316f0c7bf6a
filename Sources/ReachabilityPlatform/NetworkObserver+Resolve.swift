import CNetlink
import Glibc
import ReachabilityCore

extension NetworkObserver {
    /// Has the kernel resolve `gateway` on `link`: one empty UDP datagram to its discard port
    /// (9), which the kernel holds until the gateway's neighbour entry resolves — ARP or IPv6
    /// neighbour discovery, as for a program's first packet — and then delivers; the gateway
    /// drops it (or answers that nothing listens there). Asking with `RTM_NEWNEIGH` and
    /// `NTF_USE` would need `CAP_NET_ADMIN`, which the service does not have. Wraps
    /// `socket(2)` and `sendto(2)`.
    func resolve(_ gateway: IPAddress, on link: Int32) {
        let family = gateway.family == .ipv4 ? AF_INET : AF_INET6
        guard case .success(let fd) = Syscall.call({
            socket(family, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        }) else {
            logger.debug("cannot ask the kernel to resolve \(gateway): no UDP socket (\(Errno.current))")
            return
        }
        defer { close(fd) }
        var storage = sockaddr_storage()
        let length: Int
        if family == AF_INET {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(9).bigEndian
            withUnsafeMutableBytes(of: &address.sin_addr) { $0.copyBytes(from: gateway.bytes) }
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: address, as: sockaddr_in.self) }
            length = MemoryLayout<sockaddr_in>.size
        } else {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = UInt16(9).bigEndian
            address.sin6_scope_id = UInt32(bitPattern: link)
            withUnsafeMutableBytes(of: &address.sin6_addr) { $0.copyBytes(from: gateway.bytes) }
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: address, as: sockaddr_in6.self) }
            length = MemoryLayout<sockaddr_in6>.size
        }
        let sent = Syscall.call {
            withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, nil, 0, 0, $0, socklen_t(length)) }
            }
        }
        if case .failure(let error) = sent { logger.debug("cannot ask the kernel to resolve \(gateway): \(error)") }
    }
}
