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
        guard let response = Response(message), response.rcode == 0 else { return nil }
        var found = Answer(addresses: [], ttl: .max)
        for record in response.answers {
            found.ttl = min(found.ttl, record.ttl)
            if let address = record.address(in: message) { found.addresses.append(address) }
        }
        return found.addresses.isEmpty ? nil : found
    }

    /// Reads a negative DNS response (RFC 2308): the name does not exist (NXDOMAIN: the
    /// answer section may still hold the CNAMEs on the way) or has no address record
    /// (NODATA: NOERROR without one). How long that answer lives is its negative TTL, the
    /// least of the authority section's SOA record's own TTL and its MINIMUM field (§5).
    /// `nil` when the message is malformed, is another response (an address, SERVFAIL), or
    /// carries no SOA: such a negative answer has no lifetime (it may not be cached, §5).
    public static func parseNegative(_ message: [UInt8]) -> UInt32? {
        guard let response = Response(message), response.rcode == 0 || response.rcode == 3,
              !response.answers.contains(where: { $0.address(in: message) != nil }) else { return nil }
        var least: UInt32?
        for record in response.authority where record.type == 6 {
            // SOA RDATA: MNAME, RNAME, then SERIAL, REFRESH, RETRY, EXPIRE, MINIMUM (32 bits each).
            guard let mname = skipName(message, from: record.data.lowerBound),
                  let rname = skipName(message, from: mname), rname + 20 == record.data.upperBound else { return nil }
            let minimum = bigEndian(message[(rname + 16)..<(rname + 20)])
            least = min(least ?? .max, record.ttl, minimum)
        }
        return least
    }

    /// One resource record of a response: its type, TTL (RFC 2181 §8: one with its top bit
    /// set reads as 0) and where its data lies in the message.
    struct Record {
        var type: Int
        var ttl: UInt32
        var data: Range<Int>

        /// An A (4 bytes) or AAAA (16) record's address.
        func address(in message: [UInt8]) -> [UInt8]? {
            (type == 1 && data.count == 4) || (type == 28 && data.count == 16) ? Array(message[data]) : nil
        }
    }

    /// A response's code and the records of its answer and authority sections: `nil` when
    /// the message is no response or runs off before the answer section's end (the authority
    /// section is read as far as it goes: a large answer may have been cut short there).
    struct Response {
        var rcode: UInt8
        var answers: [Record] = []
        var authority: [Record] = []

        init?(_ message: [UInt8]) {
            guard message.count >= 12, message[2] & 0x80 != 0 else { return nil }
            rcode = message[3] & 0x0F
            let count = { (at: Int) in Int(message[at]) << 8 | Int(message[at + 1]) }
            var offset = 12
            for _ in 0..<count(4) {
                guard let end = skipName(message, from: offset), end + 4 <= message.count else { return nil }
                offset = end + 4
            }
            for _ in 0..<count(6) {
                guard let record = Self.record(message, at: &offset) else { return nil }
                answers.append(record)
            }
            for _ in 0..<count(8) {
                guard let record = Self.record(message, at: &offset) else { break }
                authority.append(record)
            }
        }

        /// The record at `offset`, which moves past it; `nil` when it runs off the message.
        private static func record(_ message: [UInt8], at offset: inout Int) -> Record? {
            guard let end = skipName(message, from: offset), end + 10 <= message.count else { return nil }
            let type = Int(message[end]) << 8 | Int(message[end + 1])
            let ttl = bigEndian(message[(end + 4)..<(end + 8)])
            let length = Int(message[end + 8]) << 8 | Int(message[end + 9])
            guard end + 10 + length <= message.count else { return nil }
            offset = end + 10 + length
            return Record(type: type, ttl: ttl & 0x8000_0000 != 0 ? 0 : ttl, data: (end + 10)..<offset)
        }
    }

    private static func bigEndian(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
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
