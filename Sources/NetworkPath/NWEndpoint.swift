/// The endpoint types a path's `gateways` are made of, with the Network
/// framework's names: `NWEndpoint.hostPort(host:port:)`, `NWEndpoint.Host`,
/// `NWEndpoint.Port`, `IPv4Address` and `IPv6Address`. Addresses are parsed
/// and printed in Swift (no Foundation); `rawValue` is the address's bytes in
/// network order as `[UInt8]` where Apple has `Data`.
public enum NWEndpoint: Hashable, Sendable, CustomDebugStringConvertible {
    /// A host and a port (a gateway is its address with port 0).
    case hostPort(host: Host, port: Port)
    /// A DNS-SD service by name, type and domain.
    case service(name: String, type: String, domain: String, interface: NWInterface?)
    /// A Unix domain socket path.
    case unix(path: String)

    /// The interface the endpoint is scoped to, if any.
    public var interface: NWInterface? {
        switch self {
        case .hostPort(let host, _): host.interface
        case .service(_, _, _, let interface): interface
        case .unix: nil
        }
    }

    public var debugDescription: String {
        switch self {
        case .hostPort(.ipv6(let address), let port): "[\(address.debugDescription)]:\(port.rawValue)"
        case .hostPort(let host, let port): "\(host.debugDescription):\(port.rawValue)"
        case .service(let name, let type, let domain, _): "\(name).\(type).\(domain)"
        case .unix(let path): path
        }
    }

    /// A host: a name or an address.
    public enum Host: Hashable, Sendable, CustomDebugStringConvertible, ExpressibleByStringLiteral {
        /// A host name, optionally scoped to an interface.
        case name(String, NWInterface?)
        case ipv4(IPv4Address)
        case ipv6(IPv6Address)

        /// An address literal becomes `.ipv4` or `.ipv6`, anything else `.name`.
        public init(_ string: String) {
            if let address = IPv4Address(string) {
                self = .ipv4(address)
            } else if let address = IPv6Address(string) {
                self = .ipv6(address)
            } else {
                self = .name(string, nil)
            }
        }

        public init(stringLiteral value: String) { self.init(value) }

        /// The interface the host is scoped to, if any.
        public var interface: NWInterface? {
            switch self {
            case .name(_, let interface): interface
            case .ipv4(let address): address.interface
            case .ipv6(let address): address.interface
            }
        }

        public var debugDescription: String {
            switch self {
            case .name(let name, _): name
            case .ipv4(let address): address.debugDescription
            case .ipv6(let address): address.debugDescription
            }
        }
    }

    /// A port number.
    public struct Port: Hashable, Sendable, RawRepresentable, ExpressibleByIntegerLiteral,
        CustomDebugStringConvertible
    {
        public let rawValue: UInt16

        public init?(rawValue: UInt16) { self.rawValue = rawValue }
        public init(integerLiteral value: UInt16) { rawValue = value }
        /// A decimal port number.
        public init?(_ string: String) {
            guard let value = UInt16(string) else { return nil }
            rawValue = value
        }

        /// Any port (0): what a gateway's endpoint carries.
        public static let any: Port = 0
        public static let ssh: Port = 22
        public static let smtp: Port = 25
        public static let http: Port = 80
        public static let pop: Port = 110
        public static let imap: Port = 143
        public static let https: Port = 443
        public static let imaps: Port = 993
        public static let socks: Port = 1080

        public var debugDescription: String { String(rawValue) }
    }
}

/// An IP address of either family, as the Network framework's protocol.
public protocol IPAddress: Hashable, Sendable, CustomDebugStringConvertible {
    /// The address's bytes in network order.
    var rawValue: [UInt8] { get }
    /// An address from its bytes in network order (4 or 16 of them), optionally scoped.
    init?(_ rawValue: [UInt8], _ interface: NWInterface?)
    /// The interface the address is scoped to (link-local gateways are).
    var interface: NWInterface? { get }
    var isLoopback: Bool { get }
    var isLinkLocal: Bool { get }
    var isMulticast: Bool { get }
}

/// An IPv4 address.
public struct IPv4Address: IPAddress {
    public let rawValue: [UInt8]
    public let interface: NWInterface?

    public init?(_ rawValue: [UInt8], _ interface: NWInterface? = nil) {
        guard rawValue.count == 4 else { return nil }
        self.rawValue = rawValue
        self.interface = interface
    }

    /// Dotted-decimal text ("192.0.2.1"), as `inet_pton` accepts it.
    public init?(_ string: String) {
        guard let bytes = AddressText.ipv4(Substring(string)) else { return nil }
        self.init(bytes)
    }

    public static let any = IPv4Address([0, 0, 0, 0])!
    public static let broadcast = IPv4Address([255, 255, 255, 255])!
    public static let loopback = IPv4Address([127, 0, 0, 1])!

    public var isLoopback: Bool { rawValue[0] == 127 }
    public var isLinkLocal: Bool { rawValue[0] == 169 && rawValue[1] == 254 }
    public var isMulticast: Bool { rawValue[0] & 0xF0 == 0xE0 }

    public var debugDescription: String { rawValue.map(String.init).joined(separator: ".") }
}

/// An IPv6 address.
public struct IPv6Address: IPAddress {
    public let rawValue: [UInt8]
    public let interface: NWInterface?

    public init?(_ rawValue: [UInt8], _ interface: NWInterface? = nil) {
        guard rawValue.count == 16 else { return nil }
        self.rawValue = rawValue
        self.interface = interface
    }

    /// RFC 4291 text ("2001:db8::1", "::ffff:192.0.2.1"). A `%scope` suffix is
    /// accepted and not kept: naming the interface needs its index, which only
    /// the path's own interfaces give (a link-local gateway carries it).
    public init?(_ string: String) {
        let text = string.split(separator: "%", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = text.first, let bytes = AddressText.ipv6(address) else { return nil }
        self.init(bytes)
    }

    public static let any = IPv6Address([UInt8](repeating: 0, count: 16))!
    public static let loopback = IPv6Address([UInt8](repeating: 0, count: 15) + [1])!

    public var isLoopback: Bool { rawValue == Self.loopback.rawValue }
    public var isLinkLocal: Bool { rawValue[0] == 0xFE && rawValue[1] & 0xC0 == 0x80 }
    public var isMulticast: Bool { rawValue[0] == 0xFF }
    /// An IPv4-mapped address (`::ffff:a.b.c.d`).
    public var isIPv4Mapped: Bool { rawValue[0..<10].allSatisfy { $0 == 0 } && rawValue[10] == 0xFF && rawValue[11] == 0xFF }

    /// RFC 5952 text: lower case, the longest run of two or more zero groups as `::`.
    public var debugDescription: String {
        let groups = (0..<8).map { UInt16(rawValue[2 * $0]) << 8 | UInt16(rawValue[2 * $0 + 1]) }
        var best = (start: -1, length: 0)
        var run = (start: -1, length: 0)
        for (i, group) in groups.enumerated() {
            if group == 0 {
                run = run.start < 0 ? (i, 1) : (run.start, run.length + 1)
                if run.length > best.length { best = run }
            } else {
                run = (-1, 0)
            }
        }
        func hex(_ range: Range<Int>) -> String {
            groups[range].map { String($0, radix: 16) }.joined(separator: ":")
        }
        guard best.length >= 2 else { return hex(0..<8) }
        return hex(0..<best.start) + "::" + hex((best.start + best.length)..<8)
    }
}

/// Address literals to bytes, the rules of `inet_pton`.
enum AddressText {
    static func ipv4(_ text: Substring) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        var bytes: [UInt8] = []
        for part in parts {
            guard !part.isEmpty, part.count <= 3, part.allSatisfy({ $0.isASCII && $0.isNumber }),
                part.count == 1 || part.first != "0", let value = UInt8(part)
            else { return nil }
            bytes.append(value)
        }
        return bytes
    }

    static func ipv6(_ text: Substring) -> [UInt8]? {
        let halves = text.components(separatedBy: "::")
        guard halves.count <= 2 else { return nil }
        func groups(_ part: Substring, allowIPv4: Bool) -> [UInt8]? {
            if part.isEmpty { return [] }
            let fields = part.split(separator: ":", omittingEmptySubsequences: false)
            var bytes: [UInt8] = []
            for (i, field) in fields.enumerated() {
                if allowIPv4, i == fields.count - 1, field.contains(".") {
                    guard let v4 = ipv4(field) else { return nil }
                    bytes += v4
                    continue
                }
                guard (1...4).contains(field.count), field.allSatisfy(\.isHexDigit),
                    let value = UInt16(field, radix: 16)
                else { return nil }
                bytes += [UInt8(value >> 8), UInt8(value & 0xFF)]
            }
            return bytes
        }
        if halves.count == 1 {
            guard let bytes = groups(halves[0], allowIPv4: true), bytes.count == 16 else { return nil }
            return bytes
        }
        guard let head = groups(halves[0], allowIPv4: false), let tail = groups(halves[1], allowIPv4: true),
            head.count + tail.count <= 14
        else { return nil }
        return head + [UInt8](repeating: 0, count: 16 - head.count - tail.count) + tail
    }
}

extension Substring {
    /// Splits on a separator of several characters (no Foundation).
    fileprivate func components(separatedBy separator: String) -> [Substring] {
        var result: [Substring] = []
        var rest = self[...]
        while let range = rest.firstRange(of: separator) {
            result.append(rest[..<range.lowerBound])
            rest = rest[range.upperBound...]
        }
        result.append(rest)
        return result
    }
}
