@testable import ReachabilityBus
import ReachabilityLoop

extension ObjectTree {
    /// The dispatcher's answer to one call made by hand, with no bus; the caller's uid is
    /// set as the connection sets it from the bus driver's answer.
    @LoopActor
    func answer(_ member: String, at path: ObjectPath, interface: String, _ arguments: [DBusValue] = [],
                from sender: String, as user: UInt32) -> Result<[DBusValue], BusError>? {
        let recorder = Recorder()
        let call = MethodCall(responder: recorder, sender: sender, path: path, interface: interface,
                              member: member, arguments: arguments, logger: logger)
        call.user = user
        Dispatcher.dispatch(call, in: self)
        return recorder.answers.first
    }
}

/// Keeps what the dispatcher answered.
@LoopActor
private final class Recorder: CallResponder {
    var answers: [Result<[DBusValue], BusError>] = []
    func send(reply values: [DBusValue], to call: MethodCall) { answers.append(.success(values)) }
    func send(error: BusError, to call: MethodCall) { answers.append(.failure(error)) }
}
