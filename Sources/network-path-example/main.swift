// Path monitoring written for Apple's Network framework, compiled unchanged on
// Linux against NetworkPath. One line per update, in a stable format:
//
//   handler satisfied expensive=false constrained=false interfaces=eth0,wlan0 uses=wiredEthernet ipv4=true ipv6=true dns=true gateways=192.0.2.1:0,[fe80::1]:0 quality=good reason=
//   sequence satisfied …
//
// "handler" lines come from a monitor's pathUpdateHandler (its interface
// requirement from the options), "sequence" lines from `for await path in
// NWPathMonitor()`, "sample" lines from Apple's documented sample handler.
//
//   network-path-example [--required wifi|cellular|wiredEthernet|other]
//                        [--prohibited TYPE,TYPE…] [--count N]
//
// --count ends the program after N handler lines (the first one comes at once).

#if canImport(Network)
import Network
#else
import NetworkPath
#endif
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One line on standard output, written at once (tests read it while the program runs).
func emit(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
}

func fail(_ message: String) -> Never {
    let bytes = Array(("network-path-example: " + message + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    exit(64)
}

let types: [String: NWInterface.InterfaceType] = [
    "wifi": .wifi, "cellular": .cellular, "wiredEthernet": .wiredEthernet, "loopback": .loopback, "other": .other,
]
let order: [(String, NWInterface.InterfaceType)] = [
    ("wifi", .wifi), ("cellular", .cellular), ("wiredEthernet", .wiredEthernet), ("other", .other),
]

func type(_ name: Substring) -> NWInterface.InterfaceType {
    guard let type = types[String(name)] else { fail("unknown interface type '\(name)'") }
    return type
}

func line(_ label: String, _ path: NWPath) -> String {
    let uses = order.filter { path.usesInterfaceType($0.1) }.map(\.0)
    let gateways = path.gateways.map(\.debugDescription)
    return "\(label) \(path.status) expensive=\(path.isExpensive) constrained=\(path.isConstrained) "
        + "interfaces=\(path.availableInterfaces.map(\.name).joined(separator: ",")) "
        + "uses=\(uses.joined(separator: ",")) ipv4=\(path.supportsIPv4) ipv6=\(path.supportsIPv6) "
        + "dns=\(path.supportsDNS) gateways=\(gateways.joined(separator: ",")) quality=\(quality(path))"
        + " reason=\(path.reason)"
}

/// `linkQuality` where the platform has it (Apple's: from macOS 26 and iOS 26).
func quality(_ path: NWPath) -> String {
    if #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *) {
        return "\(path.linkQuality)"
    }
    return "unknown"
}

struct Options {
    var required: NWInterface.InterfaceType?
    var prohibited: [NWInterface.InterfaceType] = []
    var count = Int.max

    init(_ arguments: ArraySlice<String>) {
        var arguments = arguments
        while let option = arguments.popFirst() {
            guard let value = arguments.popFirst() else { fail("\(option) needs a value") }
            switch option {
            case "--required": required = type(Substring(value))
            case "--prohibited": prohibited = value.split(separator: ",").map(type)
            case "--count":
                guard let number = Int(value), number > 0 else { fail("--count needs a positive number") }
                count = number
            default: fail("unknown option \(option)")
            }
        }
    }
}

let options = Options(CommandLine.arguments.dropFirst())
let (required, prohibited, count) = (options.required, options.prohibited, options.count)

// The issue's shape: a monitor with a requirement, its handler on the main queue.
let monitor =
    if let required { NWPathMonitor(requiredInterfaceType: required) }
    else if !prohibited.isEmpty { NWPathMonitor(prohibitedInterfaceTypes: prohibited) }
    else { NWPathMonitor() }
// Touched only by the handler, which runs on the main queue, one call at a time.
nonisolated(unsafe) var handled = 0
monitor.pathUpdateHandler = { path in
    emit(line("handler", path))
    // What the issue prints, checked against the fuller line above.
    _ = (path.status, path.isExpensive, path.availableInterfaces.map(\.name), path.usesInterfaceType(.wifi))
    handled += 1
    if handled >= count { exit(0) }
}
monitor.start(queue: .main)

// Apple's documented sample: a handler on a queue of its own.
let sampleMonitor = NWPathMonitor()
sampleMonitor.pathUpdateHandler = { path in
    if path.status == .satisfied {
        emit("sample connected expensive=\(path.isExpensive)")
    } else {
        emit("sample no-connection expensive=\(path.isExpensive)")
    }
}
sampleMonitor.start(queue: DispatchQueue(label: "Monitor"))

// And the asynchronous sequence.
for await path in NWPathMonitor() {
    emit(line("sequence", path))
}
