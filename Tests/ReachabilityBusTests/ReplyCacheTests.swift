import CDBus
import Testing
@testable import ReachabilityBus

@Suite("Reply cache")
struct ReplyCacheTests {
    /// A method call as the bus delivers it: a serial and a sender.
    private func call(serial: UInt32, sender: String) -> OpaquePointer {
        let message = dbus_message_new_method_call("org.example", "/a", "org.example.I", "M")!
        dbus_message_set_serial(message, serial)
        dbus_message_set_sender(message, sender)
        return message
    }

    private func check(_ reply: OpaquePointer?, answers serial: UInt32, to sender: String, carrying values: [DBusValue]) {
        guard let reply else {
            Issue.record("no reply")
            return
        }
        #expect(dbus_message_get_type(reply) == DBUS_MESSAGE_TYPE_METHOD_RETURN)
        #expect(dbus_message_get_reply_serial(reply) == serial)
        #expect(dbus_message_get_destination(reply).map { String(cString: $0) } == sender)
        #expect(dbus_message_get_no_reply(reply) != 0)
        #expect(dbus_message_get_serial(reply) == 0, "the connection gives each reply its own serial")
        #expect(MessageCodec.decodeBody(reply) == values)
    }

    @Test("a reused body is addressed to each caller, and changed values are a new body")
    func reuse() {
        let cache = ReplyCache(capacity: 4)
        let first = call(serial: 7, sender: ":1.7")
        let second = call(serial: 9, sender: ":1.9")
        defer { [first, second].forEach { dbus_message_unref($0) } }
        let values: [DBusValue] = [.vardict([("Flags", .uint32(2)), ("Interface", .string("eth0"))])]
        let changed: [DBusValue] = [.vardict([("Flags", .uint32(0)), ("Interface", .string(""))])]

        let replies = [cache.methodReturn(to: first, values), cache.methodReturn(to: second, values),
                       cache.methodReturn(to: first, changed)]
        defer { replies.forEach { $0.map(dbus_message_unref) } }
        check(replies[0], answers: 7, to: ":1.7", carrying: values)
        check(replies[1], answers: 9, to: ":1.9", carrying: values)
        check(replies[2], answers: 7, to: ":1.7", carrying: changed)
        #expect(cache.count == 2)
    }

    @Test("it never holds more than its capacity")
    func bounded() {
        let cache = ReplyCache(capacity: 3)
        let message = call(serial: 1, sender: ":1.1")
        defer { dbus_message_unref(message) }
        for n in 0..<10 {
            let reply = cache.methodReturn(to: message, [.uint32(UInt32(n))])
            check(reply, answers: 1, to: ":1.1", carrying: [.uint32(UInt32(n))])
            reply.map(dbus_message_unref)
            #expect(cache.count <= 3)
        }
    }
}
