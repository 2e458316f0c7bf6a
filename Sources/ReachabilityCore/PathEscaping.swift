/// Object-path labels escaped exactly like systemd's `sd_bus_path_encode`
/// (`bus_label_escape`): ASCII letters stay, ASCII digits stay unless first,
/// every other byte becomes `_` and two lower-case hex digits; "" becomes "_".
public enum PathEscaping {
    public static func escapeLabel(_ label: String) -> String {
        let bytes = Array(label.utf8)
        if bytes.isEmpty { return "_" }
        let hex = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 3)
        for (i, b) in bytes.enumerated() {
            let isLetter = (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
            let isDigit = b >= 0x30 && b <= 0x39
            if isLetter || (isDigit && i > 0) {
                out.append(b)
            } else {
                out.append(UInt8(ascii: "_"))
                out.append(hex[Int(b >> 4)])
                out.append(hex[Int(b & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The inverse; `nil` when `label` is not a valid escaped label.
    public static func unescapeLabel(_ label: String) -> String? {
        if label == "_" { return "" }
        var out: [UInt8] = []
        var it = Array(label.utf8)[...]
        while let b = it.popFirst() {
            if b == UInt8(ascii: "_") {
                guard let h = it.popFirst(), let l = it.popFirst(),
                    let hv = hexValue(h), let lv = hexValue(l)
                else { return nil }
                out.append(hv << 4 | lv)
            } else {
                out.append(b)
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x61...0x66: c - 0x61 + 10
        default: nil
        }
    }
}
