import ReachabilitydClientCore
import ReachabilityCore

/// What people type where a TARGET goes, beyond host names and addresses, and
/// the sentences reachctl answers with.
enum TargetText {
    /// Refuses a URL or a `host:port` with a message that says so and names the
    /// command to run for its host; anything else is left to the library's validation.
    static func check(_ text: String, command: String) throws(ReachabilityError) {
        switch HostInText.recognise(text) {
        case .url(let host):
            throw .invalidTarget("\"\(text)\" is a URL; a TARGET is a host name or an address"
                                 + (host.isEmpty ? "" : ": for its host, reachctl \(command) \(host)"))
        case .hostAndPort(let host):
            throw .invalidTarget("\"\(text)\" is a host and a port; a TARGET is a host name or an address"
                                 + " (reachability does not depend on the port): reachctl \(command) \(host)")
        case nil:
            return
        }
    }

    /// A "no daemon" error as a sentence: no system bus at all, or a bus that
    /// cannot start reachabilityd; `hint` says what it means for the command.
    static func explained(_ error: ReachabilityError, hint: String? = nil) -> ReachabilityError {
        let hint = hint.map { "; " + $0 } ?? ""
        if case .failed(let message) = error, message.hasPrefix("org.freedesktop.DBus.Error.AccessDenied") {
            return .serviceUnavailable("the system bus refused the call to reachabilityd: its policy is not"
                                       + " installed or not loaded (reachctl doctor says why)" + hint)
        }
        guard case .serviceUnavailable(let message) = error else { return error }
        let noBus = "cannot connect to the system bus: "
        if message.hasPrefix(noBus) {
            return .serviceUnavailable("reachabilityd cannot be asked: there is no system bus ("
                                       + message.dropFirst(noBus.count) + ")" + hint)
        }
        if let noAnswer = message.firstRange(of: " did not answer: ") {
            return .serviceUnavailable("reachabilityd did not answer (" + message[noAnswer.upperBound...] + ")" + hint)
        }
        return .serviceUnavailable("reachabilityd is not running, and the system bus cannot start it"
                                   + " (reachctl doctor says why)" + hint)
    }
}
