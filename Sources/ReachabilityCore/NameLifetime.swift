/// How long a name's answer stays true, and when to ask again (docs/design.md,
/// "Names follow their answers").
///
/// The system resolver (`getaddrinfo`, which GLib's resolver calls) gives addresses and no
/// lifetime; a DNS query of the same name on the same servers (`res_nsearch(3)`: the same
/// configuration, search list and absolute names alike) gives the records with their TTL.
/// This is its pure part: reading the answer, and spreading the next lookups.
public enum NameLifetime {
    /// A name is never asked again sooner than this after its answer (microseconds):
    /// a TTL of 0 or 1 s would otherwise make a lookup loop.
    public static let shortest: Int64 = 5_000_000
    /// After a run of temporary failures longer than the quick retries, a name is asked
    /// again this often while it keeps failing so (microseconds): an outage longer than
    /// the retries is followed within this, not only at the refresh interval.
    public static let outageRetry: Int64 = 30_000_000
    /// The part of the wait before a re-lookup that is spread (`delay`): names that got the
    /// same TTL at the same moment (a network change asks them all) are asked again over
    /// this fraction of their lifetime, not in one burst.
    public static let spreadFraction = 0.2

    /// The records of a DNS answer that matter here: the addresses (A: 4 bytes, AAAA: 16)
    /// and the least TTL among every answer record (CNAMEs on the way included).
    public struct Answer: Equatable, Sendable {
        public var addresses: [[UInt8]]
        public var ttl: UInt32
        public init(addresses: [[UInt8]], ttl: UInt32) {
            self.addresses = addresses
            self.ttl = ttl
        }
    }

    /// Reads a DNS response message (RFC 1035 §4): the header, the questions skipped, the
    /// answer section's records. `nil` when it is malformed, is not a successful response, or
    /// has no address record.
    public static func parse(_ message: [UInt8]) -> Answer? {
        guard message.count >= 12, message[2] & 0x80 != 0, message[3] & 0x0F == 0 else { return nil }
        let questions = Int(message[4]) << 8 | Int(message[5])
        let answers = Int(message[6]) << 8 | Int(message[7])
        var offset = 12
        for _ in 0..<questions {
            guard let end = skipName(message, from: offset), end + 4 <= message.count else { return nil }
            offset = end + 4
        }
        var found = Answer(addresses: [], ttl: .max)
        for _ in 0..<answers {
            guard let end = skipName(message, from: offset), end + 10 <= message.count else { return nil }
            let type = Int(message[end]) << 8 | Int(message[end + 1])
            let ttl = message[(end + 4)..<(end + 8)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            let length = Int(message[end + 8]) << 8 | Int(message[end + 9])
            let data = end + 10
            guard data + length <= message.count else { return nil }
            // RFC 2181 §8: a TTL with its top bit set is read as 0.
            found.ttl = min(found.ttl, ttl & 0x8000_0000 != 0 ? 0 : ttl)
            if (type == 1 && length == 4) || (type == 28 && length == 16) {
                found.addresses.append(Array(message[data..<(data + length)]))
            }
            offset = data + length
        }
        return found.addresses.isEmpty ? nil : found
    }

    /// The offset after a (possibly compressed) name at `offset`, or `nil` when it runs off.
    private static func skipName(_ message: [UInt8], from offset: Int) -> Int? {
        var offset = offset
        while offset < message.count {
            let length = Int(message[offset])
            if length == 0 { return offset + 1 }
            if length & 0xC0 == 0xC0 { return offset + 2 <= message.count ? offset + 2 : nil }
            guard length & 0xC0 == 0 else { return nil }
            offset += 1 + length
        }
        return nil
    }

    /// The wait before a name whose answer lives `ttl` seconds is looked up again
    /// (microseconds), or `nil` when the refresh interval (`refreshInterval` seconds) comes
    /// first anyway. The lifetime is held between `shortest` and the refresh interval; the
    /// last `spreadFraction` of it is spread by `spread` (0..<1, random per lookup), so the
    /// answer is asked again before it runs out and names that share a TTL do not come due
    /// together — never sooner than `shortest`.
    public static func delay(ttl: UInt32, refreshInterval: UInt32, spread: Double) -> Int64? {
        let refresh = Int64(refreshInterval) * 1_000_000
        let lifetime = max(shortest, Int64(ttl) * 1_000_000)
        guard lifetime < refresh else { return nil }
        let early = Int64(Double(lifetime) * spreadFraction * min(max(spread, 0), 1))
        return max(shortest, lifetime - early)
    }
}
