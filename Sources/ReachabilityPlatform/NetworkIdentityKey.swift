import CGLib
import ReachabilityCore

/// The per-machine secret `Path.NetworkIdentity` is keyed with, and the keyed hash: the same
/// network gives every process of this machine (the daemon, a library in-process) the same
/// identity, and another machine another one, so an identity cannot be matched across
/// machines. The key is HMAC-SHA256 of a constant under `/etc/machine-id` (an app-specific
/// id, as `sd_id128_get_machine_app_specific` makes: the machine id itself is never
/// exposed); without a machine id, a random key for this process's lifetime.
enum NetworkIdentityKey {
    /// Read once per process.
    nonisolated static let key: [UInt8] = {
        let machine = Syscall.readFile("/etc/machine-id", limit: 64)?.trimmingSuffix() ?? ""
        if machine.count >= 32 {
            return hmac(key: Array(machine.utf8), Array("io.github.reachabilityd network identity".utf8))
        }
        return (0..<8).flatMap { _ in withUnsafeBytes(of: g_random_int()) { Array($0) } }
    }()

    /// HMAC-SHA256 of `data` under `key`, as bytes. Wraps `g_compute_hmac_for_data`.
    static func hmac(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        guard let text = g_compute_hmac_for_data(G_CHECKSUM_SHA256, key, gsize(key.count), data, gsize(data.count)) else { return [] }
        defer { g_free(text) }
        let hex = Array(String(cString: text).utf8)
        return stride(from: 0, to: hex.count - 1, by: 2).map { UInt8(value(hex[$0]) << 4 | value(hex[$0 + 1])) }
    }

    private static func value(_ digit: UInt8) -> UInt8 { digit <= 57 ? digit - 48 : digit - 87 }

    /// The identity of `material` (`NetworkIdentity.material`): 32 hex digits, "" for none.
    static func identity(of material: String?) -> String {
        guard let material else { return "" }
        return String(NetworkIdentity.hexDigits(hmac(key: key, Array(material.utf8))).prefix(32))
    }
}

extension String {
    fileprivate func trimmingSuffix() -> String {
        var text = Substring(self)
        while let last = text.last, last.isWhitespace { text = text.dropLast() }
        return String(text)
    }
}
