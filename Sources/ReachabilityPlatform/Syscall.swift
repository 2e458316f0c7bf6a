import Glibc

/// A C library error number, typed (swift-system's `Errno`, for the calls made here).
public struct Errno: Error, RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    public static let interrupted = Errno(rawValue: EINTR)
    public static let wouldBlock = Errno(rawValue: EAGAIN)
    public static let noBufferSpace = Errno(rawValue: ENOBUFS)
    public static let canceled = Errno(rawValue: ECANCELED)

    /// The calling thread's `errno`, now.
    static var current: Errno { Errno(rawValue: errno) }

    /// Wraps `strerror`.
    public var description: String { String(cString: strerror(rawValue)) }
}

/// Every system call of this module goes through here: one place reads `errno`
/// and retries a call that a signal interrupted (EINTR).
enum Syscall {
    /// Calls `body` until it is not interrupted; a negative result is its `errno`.
    static func call<Result: FixedWidthInteger>(_ body: () -> Result) -> Swift.Result<Result, Errno> {
        while true {
            let result = body()
            if result >= 0 { return .success(result) }
            let error = Errno.current
            if error != .interrupted { return .failure(error) }
        }
    }

    /// `call`, throwing a `NetlinkError` naming `operation`.
    static func netlink<Result: FixedWidthInteger>(_ operation: String, _ body: () -> Result)
        throws(NetlinkError) -> Result
    {
        switch call(body) {
        case .success(let result): return result
        case .failure(let error): throw NetlinkError(operation: operation, errno: error.rawValue)
        }
    }

    /// The first `limit` bytes of a small file (sysfs, /etc), or `nil` if it cannot be
    /// read or is empty. Wraps `open(2)`, `read(2)` and `close(2)`.
    static func readFile(_ path: String, limit: Int) -> String? {
        guard case .success(let fd) = call({ open(path, O_RDONLY | O_CLOEXEC) }) else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: limit)
        var filled = 0
        while filled < limit {
            guard case .success(let n) = call({
                buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, limit - filled) }
            }), n > 0 else { break }
            filled += n
        }
        return filled > 0 ? String(decoding: buffer[0..<filled], as: UTF8.self) : nil
    }
}
