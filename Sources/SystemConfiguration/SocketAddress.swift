import Glibc

// BSD's socket-address length fields. Apple's structures begin with a length
// byte (`sa_len`, `sin_len`, `sin6_len`) that code written for Apple sets before
// passing an address (`zeroAddress.sa_len = UInt8(MemoryLayout<sockaddr>.size)`,
// in Reachability.swift and Alamofire's manager); glibc's have no such field, the
// length being implied by the family. With this module imported that spelling
// compiles: reading gives the size the family implies, setting changes nothing.

extension sockaddr {
    /// BSD's length byte: the size of the structure `sa_family` implies (`sockaddr_in`,
    /// `sockaddr_in6`, else `sockaddr`). Setting it has no effect: on Linux the length
    /// is implicit.
    public var sa_len: UInt8 {
        get {
            switch Int32(sa_family) {
            case AF_INET: UInt8(MemoryLayout<sockaddr_in>.size)
            case AF_INET6: UInt8(MemoryLayout<sockaddr_in6>.size)
            default: UInt8(MemoryLayout<sockaddr>.size)
            }
        }
        set {}
    }

    /// Apple's memberwise initialiser, with BSD's length byte first (ignored: on Linux
    /// the length is implicit).
    public init(
        sa_len: UInt8, sa_family: sa_family_t,
        sa_data: (CChar, CChar, CChar, CChar, CChar, CChar, CChar, CChar, CChar, CChar, CChar, CChar, CChar, CChar)
    ) {
        self.init(sa_family: sa_family, sa_data: sa_data)
    }
}

extension sockaddr_in {
    /// BSD's length byte: always `MemoryLayout<sockaddr_in>.size`; setting it has no effect.
    public var sin_len: UInt8 {
        get { UInt8(MemoryLayout<sockaddr_in>.size) }
        set {}
    }

    /// Apple's memberwise initialiser, with BSD's length byte first (ignored: on Linux
    /// the length is implicit): `sockaddr_in(sin_len: 0, sin_family: 0, sin_port: 0,
    /// sin_addr: in_addr(s_addr: 0), sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))`.
    public init(
        sin_len: UInt8, sin_family: sa_family_t, sin_port: in_port_t, sin_addr: in_addr,
        sin_zero: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8)
    ) {
        self.init(sin_family: sin_family, sin_port: sin_port, sin_addr: sin_addr, sin_zero: sin_zero)
    }
}

extension sockaddr_in6 {
    /// BSD's length byte: always `MemoryLayout<sockaddr_in6>.size`; setting it has no effect.
    public var sin6_len: UInt8 {
        get { UInt8(MemoryLayout<sockaddr_in6>.size) }
        set {}
    }

    /// Apple's memberwise initialiser, with BSD's length byte first (ignored: on Linux
    /// the length is implicit).
    public init(
        sin6_len: UInt8, sin6_family: sa_family_t, sin6_port: in_port_t, sin6_flowinfo: UInt32,
        sin6_addr: in6_addr, sin6_scope_id: UInt32
    ) {
        self.init(
            sin6_family: sin6_family, sin6_port: sin6_port, sin6_flowinfo: sin6_flowinfo, sin6_addr: sin6_addr,
            sin6_scope_id: sin6_scope_id)
    }
}

extension sockaddr_storage {
    /// BSD's length byte: the size of the structure `ss_family` implies; setting it has no effect.
    public var ss_len: UInt8 {
        get {
            switch Int32(ss_family) {
            case AF_INET: UInt8(MemoryLayout<sockaddr_in>.size)
            case AF_INET6: UInt8(MemoryLayout<sockaddr_in6>.size)
            default: UInt8(MemoryLayout<sockaddr_storage>.size)
            }
        }
        set {}
    }
}

/// The text of a socket address, for the runtime's targets: an IPv4 or IPv6
/// literal (IPv6 with `%interface` for a scope), `""` for the zero address of
/// either family (Apple's "internet": no remote endpoint), `nil` for a family
/// that is neither (Apple's `is_valid_address` refuses it). On Linux nothing says
/// how long the structure is: `AF_INET6` is read as a `sockaddr_in6`.
func addressText(_ address: UnsafePointer<sockaddr>) -> String? {
    var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
    switch Int32(address.pointee.sa_family) {
    case AF_INET:
        var sin = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in.self)
        if sin.sin_addr.s_addr == 0 { return "" }
        guard inet_ntop(AF_INET, &sin.sin_addr, &buffer, socklen_t(buffer.count)) != nil else { return nil }
        return string(of: buffer)
    case AF_INET6:
        var sin6 = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in6.self)
        let isZero = withUnsafeBytes(of: sin6.sin6_addr) { $0.allSatisfy { $0 == 0 } }
        if isZero { return "" }
        guard inet_ntop(AF_INET6, &sin6.sin6_addr, &buffer, socklen_t(buffer.count)) != nil else { return nil }
        var text = string(of: buffer)
        if sin6.sin6_scope_id != 0 {
            var name = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
            text += "%" + (if_indextoname(sin6.sin6_scope_id, &name) != nil ? string(of: name) : "\(sin6.sin6_scope_id)")
        }
        return text
    default:
        return nil
    }
}

/// The text before the first NUL of a C string buffer.
private func string(of buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
