import CDBus
import Glibc
import ReachabilityLoop

/// Converts between `DBusValue` and libdbus message iterators. Every
/// `dbus_message_iter_*` call of the project is in this file.
enum MessageCodec {
    /// A type code as libdbus takes it. A `Unicode.Scalar`, not a `Character`: reading a
    /// Character's ASCII value walks grapheme-breaking tables, on every value encoded.
    static func code(_ c: Unicode.Scalar) -> Int32 { Int32(c.value) }

    /// The body of `message` as values; `nil` if it holds a type this service never accepts
    /// (unix file descriptors).
    static func decodeBody(_ message: OpaquePointer) -> [DBusValue]? {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(message, &iter) != 0 else { return [] }
        var values: [DBusValue] = []
        repeat {
            guard let value = decode(&iter) else { return nil }
            values.append(value)
        } while dbus_message_iter_next(&iter) != 0
        return values
    }

    private static func basic<T>(_ iter: inout DBusMessageIter, _ initial: T) -> T {
        var v = initial
        withUnsafeMutablePointer(to: &v) { dbus_message_iter_get_basic(&iter, $0) }
        return v
    }

    private static func string(_ iter: inout DBusMessageIter) -> String {
        let p: UnsafePointer<CChar>? = basic(&iter, nil)
        return p.map { String(cString: $0) } ?? ""
    }

    /// The signature of the value under `iter` (libdbus allocates it).
    private static func signature(_ iter: inout DBusMessageIter) -> String {
        guard let s = dbus_message_iter_get_signature(&iter) else { return "" }
        defer { dbus_free(s) }
        return String(cString: s)
    }

    private static func decode(_ iter: inout DBusMessageIter) -> DBusValue? {
        let type = dbus_message_iter_get_arg_type(&iter)
        switch UInt8(truncatingIfNeeded: type) {
        case UInt8(ascii: "y"): return .byte(basic(&iter, 0))
        case UInt8(ascii: "b"): return .boolean(basic(&iter, dbus_bool_t(0)) != 0)
        case UInt8(ascii: "n"): return .int16(basic(&iter, 0))
        case UInt8(ascii: "q"): return .uint16(basic(&iter, 0))
        case UInt8(ascii: "i"): return .int32(basic(&iter, 0))
        case UInt8(ascii: "u"): return .uint32(basic(&iter, 0))
        case UInt8(ascii: "x"): return .int64(basic(&iter, 0))
        case UInt8(ascii: "t"): return .uint64(basic(&iter, 0))
        case UInt8(ascii: "d"): return .double(basic(&iter, 0.0))
        case UInt8(ascii: "s"): return .string(string(&iter))
        case UInt8(ascii: "g"): return .signature(string(&iter))
        case UInt8(ascii: "o"):
            // libdbus has validated the path already.
            return ObjectPath(rawValue: string(&iter)).map { .objectPath($0) }
        case UInt8(ascii: "v"):
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            return decode(&sub).map { .variant($0) }
        case UInt8(ascii: "r"):
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            var fields: [DBusValue] = []
            while dbus_message_iter_get_arg_type(&sub) != 0 {
                guard let f = decode(&sub) else { return nil }
                fields.append(f)
                dbus_message_iter_next(&sub)
            }
            return .structure(fields)
        case UInt8(ascii: "a"):
            let element = String(signature(&iter).dropFirst())
            var sub = DBusMessageIter()
            dbus_message_iter_recurse(&iter, &sub)
            if element.hasPrefix("{") {
                let inner = element.dropFirst().dropLast()
                let keySig = String(inner.prefix(1))
                let valueSig = String(inner.dropFirst())
                var entries: [DBusValue.DictionaryEntry] = []
                while dbus_message_iter_get_arg_type(&sub) != 0 {
                    var entry = DBusMessageIter()
                    dbus_message_iter_recurse(&sub, &entry)
                    guard let k = decode(&entry) else { return nil }
                    dbus_message_iter_next(&entry)
                    guard let v = decode(&entry) else { return nil }
                    entries.append(.init(k, v))
                    dbus_message_iter_next(&sub)
                }
                return .dictionary(keySignature: keySig, valueSignature: valueSig, entries)
            }
            var items: [DBusValue] = []
            while dbus_message_iter_get_arg_type(&sub) != 0 {
                guard let item = decode(&sub) else { return nil }
                items.append(item)
                dbus_message_iter_next(&sub)
            }
            return .array(elementSignature: element, items)
        default:
            return nil
        }
    }

    /// Whether the values in `message`'s body take more than `limit` bytes, told without
    /// copying any: a fixed-size array by its count, a string by its length (read no further
    /// than the limit), everything else by walking it — and the walk stops once past the
    /// limit, so a message of any size costs at most about `limit` bytes' worth of steps.
    static func bodyExceeds(_ message: OpaquePointer, _ limit: Int) -> Bool {
        var iter = DBusMessageIter()
        guard dbus_message_iter_init(message, &iter) != 0 else { return false }
        var left = limit
        return exceeds(&iter, &left)
    }

    /// Bytes of one value of a fixed-size type (0 for any other type).
    private static func fixedSize(_ type: Int32) -> Int {
        switch UInt8(truncatingIfNeeded: type) {
        case UInt8(ascii: "y"): 1
        case UInt8(ascii: "n"), UInt8(ascii: "q"): 2
        case UInt8(ascii: "b"), UInt8(ascii: "i"), UInt8(ascii: "u"), UInt8(ascii: "h"): 4
        case UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"): 8
        default: 0
        }
    }

    /// Takes the size of the values from `iter` to the end of its container off `left`;
    /// true as soon as `left` is below zero.
    private static func exceeds(_ iter: inout DBusMessageIter, _ left: inout Int) -> Bool {
        while case let type = dbus_message_iter_get_arg_type(&iter), type != 0 {
            switch UInt8(truncatingIfNeeded: type) {
            case UInt8(ascii: "s"), UInt8(ascii: "g"), UInt8(ascii: "o"):
                let p: UnsafePointer<CChar>? = basic(&iter, nil)
                left -= 5 + (p.map { strnlen($0, max(0, left) + 1) } ?? 0)
            case UInt8(ascii: "a") where fixedSize(dbus_message_iter_get_element_type(&iter)) > 0:
                let size = fixedSize(dbus_message_iter_get_element_type(&iter))
                left -= 4 + Int(dbus_message_iter_get_element_count(&iter)) * size
            case UInt8(ascii: "a"), UInt8(ascii: "v"), UInt8(ascii: "r"), UInt8(ascii: "e"):
                var sub = DBusMessageIter()
                dbus_message_iter_recurse(&iter, &sub)
                left -= 4
                if exceeds(&sub, &left) { return true }
            default:
                left -= max(1, fixedSize(type))
            }
            if left < 0 { return true }
            guard dbus_message_iter_next(&iter) != 0 else { return false }
        }
        return false
    }

    /// Appends `values` to `message`'s body. Returns false only when libdbus is out of memory.
    @discardableResult
    static func appendBody(_ values: [DBusValue], to message: OpaquePointer) -> Bool {
        var iter = DBusMessageIter()
        dbus_message_iter_init_append(message, &iter)
        return values.allSatisfy { encode($0, into: &iter) }
    }

    private static func appendBasic<T>(_ iter: inout DBusMessageIter, _ type: Unicode.Scalar, _ value: T) -> Bool {
        var v = value
        return withUnsafePointer(to: &v) { dbus_message_iter_append_basic(&iter, code(type), $0) } != 0
    }

    private static func appendString(_ iter: inout DBusMessageIter, _ type: Unicode.Scalar, _ s: String) -> Bool {
        s.withCString { text in
            if strlen(text) == s.utf8.count { return appendBasic(&iter, type, text) }
            // D-Bus strings cannot hold NUL; drop any rather than truncate silently.
            let clean = String(String.UnicodeScalarView(s.unicodeScalars.filter { $0 != "\0" }))
            return clean.withCString { appendBasic(&iter, type, $0) }
        }
    }

    private static func container(
        _ iter: inout DBusMessageIter, _ type: Unicode.Scalar, _ contained: String?,
        _ body: (inout DBusMessageIter) -> Bool
    ) -> Bool {
        var sub = DBusMessageIter()
        let opened: Bool =
            if let contained {
                contained.withCString { dbus_message_iter_open_container(&iter, code(type), $0, &sub) } != 0
            } else {
                dbus_message_iter_open_container(&iter, code(type), nil, &sub) != 0
            }
        guard opened else { return false }
        guard body(&sub) else {
            dbus_message_iter_abandon_container(&iter, &sub)
            return false
        }
        return dbus_message_iter_close_container(&iter, &sub) != 0
    }

    private static func encode(_ value: DBusValue, into iter: inout DBusMessageIter) -> Bool {
        switch value {
        case .byte(let v): return appendBasic(&iter, "y", v)
        case .boolean(let v): return appendBasic(&iter, "b", dbus_bool_t(v ? 1 : 0))
        case .int16(let v): return appendBasic(&iter, "n", v)
        case .uint16(let v): return appendBasic(&iter, "q", v)
        case .int32(let v): return appendBasic(&iter, "i", v)
        case .uint32(let v): return appendBasic(&iter, "u", v)
        case .int64(let v): return appendBasic(&iter, "x", v)
        case .uint64(let v): return appendBasic(&iter, "t", v)
        case .double(let v): return appendBasic(&iter, "d", v)
        case .string(let s): return appendString(&iter, "s", s)
        case .signature(let s): return appendString(&iter, "g", s)
        case .objectPath(let p): return appendString(&iter, "o", p.rawValue)
        case .variant(let inner):
            return container(&iter, "v", inner.signature) { encode(inner, into: &$0) }
        case .structure(let fields):
            return container(&iter, "r", nil) { sub in fields.allSatisfy { encode($0, into: &sub) } }
        case .array(let element, let items):
            return container(&iter, "a", element) { sub in items.allSatisfy { encode($0, into: &sub) } }
        case .dictionary(let k, let v, let entries):
            return container(&iter, "a", "{" + k + v + "}") { sub in
                entries.allSatisfy { entry in
                    container(&sub, "e", nil) { e in encode(entry.key, into: &e) && encode(entry.value, into: &e) }
                }
            }
        }
    }
}
