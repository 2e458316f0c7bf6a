import Logging
import ReachabilityBus
import ReachabilityCore
import ReachabilityLoop

/// `org.freedesktop.LogControl1` on `/org/freedesktop/LogControl1`: the level and target
/// of the daemon's ``SystemLog`` at run time (`systemctl service-log-level`,
/// `service-log-target`). Everyone reads; root alone sets (the bus policy says so too).
@LoopActor
final class LogControlObject {
    /// The log whose level and target are set.
    let log: SystemLog
    /// Where a change is told.
    let logger: Logger

    init(log: SystemLog, logger: Logger) {
        self.log = log
        self.logger = logger
    }

    /// The `LogControl1` interface: every member declared once, here.
    nonisolated static let interface = Interface<LogControlObject>(
        Names.logControlInterface,
        properties: [
            Property(Contract.LogControl1.logLevel, { .string($0.log.level.name) }, set: {
                object, value, call throws(BusError) in
                let name = try root(call, value, setting: "LogLevel")
                guard let level = Log.Priority(name: name) else {
                    throw .invalidArgs("LogLevel is one of \(Log.Priority.allCases.map(\.name).joined(separator: ", "))"
                                       + ", not \(InvalidTarget.quoted(name))")
                }
                object.log.level = level
                object.logger.notice("log level set to \(level.name) by \(call.sender)")
            }),
            Property(Contract.LogControl1.logTarget, { .string($0.log.target.rawValue) }, set: {
                object, value, call throws(BusError) in
                let name = try root(call, value, setting: "LogTarget")
                if name == "auto" {
                    object.log.setTarget(nil)
                } else if let target = Log.Target(rawValue: name) {
                    object.log.setTarget(target)
                } else {
                    throw .invalidArgs("LogTarget is one of \(Log.Target.allCases.map(\.rawValue).joined(separator: ", "))"
                                       + " or auto, not \(InvalidTarget.quoted(name))")
                }
                object.logger.notice("log target set to \(object.log.target.rawValue) by \(call.sender)")
            }),
            Property(Contract.LogControl1.syslogIdentifier) { .string($0.log.program) },
        ],
        introspection: Names.contract[Names.logControlInterface])

    /// The string a root caller sets; anybody else is refused.
    private static func root(_ call: MethodCall, _ value: DBusValue, setting name: String) throws(BusError) -> String {
        guard call.user == 0 else {
            throw .accessDenied("only root may set \(name) (the caller is uid \(call.user))")
        }
        guard case .string(let text) = value else { throw .invalidArgs("\(name) is a string") }
        return text
    }
}
