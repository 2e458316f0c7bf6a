// A small program on the ReachabilitydClient library, as an application would use it:
// a listener on a queue, stopped and restarted on request. The integration
// tests drive it through standard input; it is also a runnable example.
//
//   reachability-example [--daemon | --no-daemon] [TARGET]
//   reachability-example [--daemon | --no-daemon] --churn N [TARGET]
//   reachability-example [--daemon | --no-daemon] --invalidations [TARGET]
//
// Prints "mode daemon|in-process", then "status S flags F" for every listener
// call. Reads commands, one per line: "stop", "start", "flags" (prints the
// `flags` property), "exit". With `--churn N` it instead creates N managers one
// after another, starts each listening and drops it at once, whatever is being
// delivered to it (a stress test of the library's teardown), then prints
// "churned N". With `--invalidations` it also prints "invalidated REASON" for each event
// of a NetworkInvalidationMonitor.
import Dispatch
import Foundation
import ReachabilitydClient

func say(_ line: String) { FileHandle.standardOutput.write(Data((line + "\n").utf8)) }

func describe(_ status: NetworkReachabilityManager.NetworkReachabilityStatus) -> String {
    switch status {
    case .unknown: "unknown"
    case .notReachable: "notReachable"
    case .reachable(.ethernetOrWiFi): "reachable-ethernetOrWiFi"
    case .reachable(.cellular): "reachable-cellular"
    }
}

var arguments = Array(CommandLine.arguments.dropFirst())
var mode: ReachabilityMode?
if let index = arguments.firstIndex(of: "--daemon") { mode = .daemon; arguments.remove(at: index) }
if let index = arguments.firstIndex(of: "--no-daemon") { mode = .inProcess; arguments.remove(at: index) }
var churn: Int?
if let index = arguments.firstIndex(of: "--churn"), index + 1 < arguments.count {
    churn = Int(arguments[index + 1])
    arguments.removeSubrange(index...index + 1)
}
var invalidations: NetworkInvalidationMonitor?
if let index = arguments.firstIndex(of: "--invalidations") {
    arguments.remove(at: index)
    invalidations = NetworkInvalidationMonitor(queue: DispatchQueue(label: "invalidations")) { reason in
        say("invalidated \(reason.rawValue)")
    }
}
let target = arguments.first.map(ReachabilityTarget.init) ?? .internet

if let churn {
    let queue = DispatchQueue(label: "churn")
    for _ in 0..<churn {
        let manager = try? NetworkReachabilityManager(target: target, mode: mode)
        manager?.startListening(onQueue: queue) { _ in }
    }
    say("churned \(churn)")
    exit(0)
}

let manager: NetworkReachabilityManager
do {
    manager = try NetworkReachabilityManager(target: target, mode: mode)
    // Creating it never waits for the bus; this does (and fails with `--daemon` and no daemon).
    _ = try manager.chosenMode()
} catch {
    // The error is typed: ReachabilityError.
    let kind =
        switch error {
        case .invalidTarget: "invalid target"
        case .serviceUnavailable: "service unavailable"
        case .tooManyTargets, .limitsExceeded: "limit reached"
        case .failed: "failed"
        }
    FileHandle.standardError.write(Data("reachability-example: \(kind): \(error.message)\n".utf8))
    exit(2)
}
say("mode \(manager.mode)")

let queue = DispatchQueue(label: "listener")
func start() {
    let started = manager.startListening(onQueue: queue) { status in
        say("status \(describe(status)) flags \(manager.flags.map { String($0.rawValue, radix: 16) } ?? "-")")
    }
    if !started { say("error \(manager.lastError.map { "\($0)" } ?? "?")") }
}
start()

while let command = readLine() {
    switch command {
    case "stop":
        manager.stopListening()
        queue.sync { say("stopped") }
    case "start": start()
    case "flags": say("flags \(manager.flags.map { String($0.rawValue, radix: 16) } ?? "-")")
    case "exit":
        invalidations?.cancel()
        exit(0)
    default: say("unknown command \(command)")
    }
}
