import Glibc

/// The network namespace a process answers for: every link, route and rule it reads is
/// that namespace's. The daemon publishes its own (`Manager.NetworkNamespace`); a client
/// compares it with its own and evaluates in-process when they differ (a container given
/// the host's bus socket), since the daemon's answer would be another network's.
public enum NetworkNamespace {
    /// The inode number of this process's network namespace (`stat -L /proc/self/ns/net`),
    /// 0 when it cannot be read. Wraps `open(2)` and `fstat(2)` (the file is the namespace).
    public static func current() -> UInt64 {
        guard case .success(let fd) = Syscall.call({ open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC) }) else {
            return 0
        }
        defer { close(fd) }
        var info = stat()
        guard case .success = Syscall.call({ fstat(fd, &info) }) else { return 0 }
        return UInt64(info.st_ino)
    }
}
