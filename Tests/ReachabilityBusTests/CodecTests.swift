import CDBus
import ReachabilityCore
import ReachabilityFairness
import Testing
@testable import ReachabilityBus

@Suite("Message codec")
struct CodecTests {
    /// Encodes `values` into a real libdbus message and decodes them back.
    private func roundTrip(_ values: [DBusValue]) -> [DBusValue]? {
        let message = dbus_message_new_signal("/a", "org.example.I", "S")!
        defer { dbus_message_unref(message) }
        guard MessageCodec.appendBody(values, to: message) else { return nil }
        #expect(String(cString: dbus_message_get_signature(message)) == values.signature)
        return MessageCodec.decodeBody(message)
    }

    @Test("every type survives a round trip through libdbus")
    func roundTrips() {
        let values: [DBusValue] = [
            .byte(7), .boolean(true), .int16(-3), .uint16(3), .int32(-1), .uint32(0x40002),
            .int64(-5), .uint64(1 << 40), .double(1.5), .string("héllo"), .objectPath(ObjectPath("/a/b")),
            .signature("a{sv}"), .strings([]), .strings(["x", "y"]),
            .vardict([("Flags", .uint32(2)), ("Name", .string(""))]),
            .structure([.int32(1), .string("s")]), .variant(.variant(.boolean(false))),
            .dictionary(keySignature: "o", valueSignature: "a{sv}", []),
        ]
        #expect(roundTrip(values) == values)
    }

    @Test("NUL bytes cannot reach the wire")
    func nul() {
        #expect(roundTrip([.string("a\0b")]) == [.string("ab")])
    }

    /// Whether a message holding `values` is found to exceed `limit` bytes of arguments.
    private func exceeds(_ values: [DBusValue], _ limit: Int) -> Bool {
        let message = dbus_message_new_signal("/a", "org.example.I", "S")!
        defer { dbus_message_unref(message) }
        #expect(MessageCodec.appendBody(values, to: message))
        return MessageCodec.bodyExceeds(message, limit)
    }

    @Test("a body's size is told without decoding it, and no call of the contract comes near the limit")
    func bodySize() {
        let limit = Limits.standard.argumentBytes
        // The contract's calls: a host name, an address, a property name, Set's value.
        #expect(!exceeds([.string(String(repeating: "a", count: 253))], limit))
        #expect(!exceeds([.string("io.github.reachabilityd.Reachability1.Target"), .string("Flags"),
                          .variant(.uint32(2))], limit))
        #expect(!exceeds([], limit))
        // Past it, whatever the shape: a string, a fixed-size array, an array of strings, nested.
        #expect(exceeds([.string(String(repeating: "x", count: limit + 1))], limit))
        #expect(exceeds([.array(elementSignature: "y", Array(repeating: .byte(1), count: limit + 1))], limit))
        #expect(exceeds([.array(elementSignature: "t", Array(repeating: .uint64(1), count: limit / 8 + 1))], limit))
        #expect(exceeds([.strings(Array(repeating: "abcdefghijk", count: limit / 16 + 1))], limit))
        #expect(exceeds([.variant(.structure([.int32(1), .strings(Array(repeating: "x", count: limit))]))], limit))
        #expect(exceeds([.vardict((0..<(limit / 8)).map { ("k\($0)", .boolean(true)) })], limit))
        // Just under it, not.
        #expect(!exceeds([.string(String(repeating: "x", count: limit - 64))], limit))
        #expect(!exceeds([.array(elementSignature: "y", Array(repeating: .byte(1), count: limit - 64))], limit))
    }

    @Test("object path grammar", arguments: [
        ("/", true), ("/a/b_c/D1", true), ("", false), ("a", false), ("/a/", false), ("//a", false),
        ("/a-b", false), ("/a.b", false), ("/é", false),
    ])
    func paths(path: String, valid: Bool) {
        #expect(ObjectPath.isValid(path) == valid)
    }

    @Test("contract elements are found by name")
    func contract() {
        let contract = InterfaceContract(xml: """
            <node>
              <interface name="a.B"><method name="M"/></interface>
              <interface name="a.C"></interface>
            </node>
            """)
        #expect(contract.elements.keys.sorted() == ["a.B", "a.C"])
        #expect(contract["a.B"].contains("<method name=\"M\"/>"))
    }

    @Test("an interface's own comment, and the document's, are part of what is served")
    func contractComments() {
        let contract = InterfaceContract(xml: """
            <!DOCTYPE node PUBLIC "x" "y">
            <!-- the document -->
            <node>
              <!-- B's documentation -->
              <interface name="a.B"><!-- M --><method name="M"/></interface>

              <!--
                C's documentation
              -->
              <interface name="a.C"></interface>
              <interface name="a.D"></interface>
            </node>
            """)
        #expect(contract.header == "<!-- the document -->\n")
        #expect(contract["a.B"] == """
            <!-- the document -->
              <!-- B's documentation -->
              <interface name="a.B"><!-- M --><method name="M"/></interface>
            """)
        #expect(contract["a.C"] == "  <!--\n    C's documentation\n  -->\n  <interface name=\"a.C\"></interface>")
        #expect(contract["a.D"] == "  <interface name=\"a.D\"></interface>")
    }
}
