/// A D-Bus object path, checked against the specification's grammar.
public struct ObjectPath: RawRepresentable, Hashable, Sendable, CustomStringConvertible, Comparable {
    public let rawValue: String

    /// `nil` unless `rawValue` is a valid object path.
    public init?(rawValue: String) {
        guard Self.isValid(rawValue) else { return nil }
        self.rawValue = rawValue
    }

    /// For paths known valid at compile time.
    public init(_ literal: StaticString) {
        let s = literal.description
        precondition(Self.isValid(s), "invalid object path \(s)")
        self.rawValue = s
    }

    public var description: String { rawValue }

    public static func < (a: ObjectPath, b: ObjectPath) -> Bool { a.rawValue < b.rawValue }

    /// A child path: `self` + "/" + `element` (an already escaped element).
    public func appending(_ element: String) -> ObjectPath? {
        ObjectPath(rawValue: rawValue == "/" ? "/" + element : rawValue + "/" + element)
    }

    /// The parent path, `nil` for "/".
    public var parent: ObjectPath? {
        guard rawValue != "/", let slash = rawValue.lastIndex(of: "/") else { return nil }
        let p = String(rawValue[..<slash])
        return ObjectPath(rawValue: p.isEmpty ? "/" : p)
    }

    public static func isValid(_ s: String) -> Bool {
        let bytes = Array(s.utf8)
        guard bytes.first == UInt8(ascii: "/") else { return false }
        if bytes.count == 1 { return true }
        guard bytes.last != UInt8(ascii: "/") else { return false }
        var previousSlash = false
        for b in bytes {
            if b == UInt8(ascii: "/") {
                if previousSlash { return false }
                previousSlash = true
                continue
            }
            previousSlash = false
            let ok = (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
                || b == UInt8(ascii: "_")
            if !ok { return false }
        }
        return true
    }
}

/// One D-Bus value with its type. Containers carry their element signatures so
/// that empty arrays and dictionaries still encode with the right type.
///
/// Only the containers are boxed (`indirect`): a scalar or a string is held inline, so the
/// values every object keeps of its announced properties cost no allocation each.
public enum DBusValue: Hashable, Sendable {
    case byte(UInt8)
    case boolean(Bool)
    case int16(Int16)
    case uint16(UInt16)
    case int32(Int32)
    case uint32(UInt32)
    case int64(Int64)
    case uint64(UInt64)
    case double(Double)
    case string(String)
    case objectPath(ObjectPath)
    case signature(String)
    indirect case array(elementSignature: String, [DBusValue])
    indirect case dictionary(keySignature: String, valueSignature: String, [DictionaryEntry])
    indirect case structure([DBusValue])
    indirect case variant(DBusValue)

    public struct DictionaryEntry: Hashable, Sendable {
        public var key: DBusValue
        public var value: DBusValue
        public init(_ key: DBusValue, _ value: DBusValue) {
            self.key = key
            self.value = value
        }
    }

    /// This value's D-Bus type signature.
    public var signature: String {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .array(let element, _): "a" + element
        case .dictionary(let k, let v, _): "a{" + k + v + "}"
        case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
        case .variant: "v"
        }
    }

    /// `as` from Swift strings.
    public static func strings(_ values: [String]) -> DBusValue {
        .array(elementSignature: "s", values.map { .string($0) })
    }

    /// `a{sv}` from name/value pairs, in the given order.
    public static func vardict(_ entries: [(String, DBusValue)]) -> DBusValue {
        .dictionary(keySignature: "s", valueSignature: "v",
                    entries.map { DictionaryEntry(.string($0.0), .variant($0.1)) })
    }

    public var stringValue: String? {
        switch self {
        case .string(let s), .signature(let s): s
        case .objectPath(let p): p.rawValue
        default: nil
        }
    }
}

extension Array where Element == DBusValue {
    /// The concatenated signature of a message body.
    public var signature: String { map(\.signature).joined() }
}

extension DBusValue {
    /// About how many bytes this value takes in a marshalled message: the
    /// payload, length words and the largest alignment padding. What the service
    /// charges a caller for a reply, and a queued call for its arguments, without
    /// marshalling anything twice.
    public var wireSize: Int {
        switch self {
        case .byte: 1
        case .boolean, .int32, .uint32: 4
        case .int16, .uint16: 2
        case .int64, .uint64, .double: 8
        case .string(let s): 4 + s.utf8.count + 1
        case .objectPath(let p): 4 + p.rawValue.utf8.count + 1
        case .signature(let s): 1 + s.utf8.count + 1
        case .array(_, let values): 8 + values.reduce(0) { $0 + $1.wireSize + 3 }
        case .dictionary(_, _, let entries): 8 + entries.reduce(0) { $0 + 8 + $1.key.wireSize + $1.value.wireSize }
        case .structure(let fields): 8 + fields.reduce(0) { $0 + $1.wireSize + 3 }
        case .variant(let value): 2 + value.signature.utf8.count + 7 + value.wireSize
        }
    }
}

extension Array where Element == DBusValue {
    /// About how many bytes a message with this body takes, its header included.
    public var messageSize: Int { 128 + reduce(0) { $0 + $1.wireSize } }
}
