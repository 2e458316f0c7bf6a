import CDBus
import ReachabilityCore
import ReachabilityFairness
import ReachabilityLoop

/// Method returns built from a marshalled body kept for the values last sent.
///
/// Marshalling is most of what a reply costs: libdbus spends about 2,500
/// instructions on each variant container, and a `GetAll` of a target has
/// thirteen. The same values are asked for again and again (a target's
/// properties change only when the network does), so each distinct reply body
/// is marshalled once and copied for every caller; only the reply serial and
/// the destination differ. Keyed by the values themselves: a changed value is a
/// different key, so nothing can be served stale and nothing needs invalidating.
/// At most `capacity` bodies are kept (emptied when full).
final class ReplyCache {
    private var templates: [[DBusValue]: OpaquePointer] = [:]
    /// The body used last: the same call repeated is answered after one comparison,
    /// without hashing the values (a third of the cost of a `GetAll`).
    private var last: (values: [DBusValue], template: OpaquePointer)?
    let capacity: Int

    init(capacity: Int = ServiceLimits.standard.replyCache) { self.capacity = capacity }

    /// The largest body kept, in bytes (about: `messageSize`).
    static let largestKept = ServiceLimits.standard.largestKeptReply

    deinit { clear() }

    var count: Int { templates.count }

    private func clear() {
        last = nil
        for template in templates.values { dbus_message_unref(template) }
        templates.removeAll(keepingCapacity: true)
    }

    /// A method return to `call` carrying `values` (the caller unrefs it); `nil` when
    /// libdbus is out of memory. Does what `dbus_message_new_method_return` does: the
    /// call's sender as destination, its serial as reply serial, no reply expected.
    func methodReturn(to call: OpaquePointer, _ values: [DBusValue], size: Int = 0) -> OpaquePointer? {
        // A large body (GetManagedObjects, Introspect) is built for its one reply and not kept:
        // 64 of them would be megabytes held for nothing (property values repeat; listings rarely).
        guard size <= Self.largestKept else {
            guard let reply = dbus_message_new_method_return(call) else { return nil }
            guard MessageCodec.appendBody(values, to: reply) else {
                dbus_message_unref(reply)
                return nil
            }
            return reply
        }
        let template: OpaquePointer
        if let last, last.values == values {
            template = last.template
        } else if let cached = templates[values] {
            template = cached
            last = (values, cached)
        } else {
            guard let fresh = dbus_message_new(DBUS_MESSAGE_TYPE_METHOD_RETURN) else { return nil }
            guard MessageCodec.appendBody(values, to: fresh) else {
                dbus_message_unref(fresh)
                return nil
            }
            if templates.count >= capacity { clear() }
            templates[values] = fresh
            last = (values, fresh)
            template = fresh
        }
        guard let reply = dbus_message_copy(template) else { return nil }
        dbus_message_set_no_reply(reply, 1)
        let addressed = dbus_message_set_reply_serial(reply, dbus_message_get_serial(call)) != 0
            && dbus_message_get_sender(call).map { dbus_message_set_destination(reply, $0) != 0 } ?? true
        guard addressed else {
            dbus_message_unref(reply)
            return nil
        }
        return reply
    }
}
