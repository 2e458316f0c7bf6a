import Foundation
import ReachabilityBus

// reachability-bench ADDRESS [HOST] [CALLS]: round-trip cost of the daemon's
// D-Bus calls from one libdbus client, next to Peer.Ping as the floor.
// Prints one line per call: p50, p99 (µs), calls per second, ratio to Ping.

let arguments = CommandLine.arguments
guard arguments.count >= 2 else {
    FileHandle.standardError.write(Data("usage: reachability-bench ADDRESS [HOST] [CALLS]\n".utf8))
    exit(2)
}
let address = arguments[1]
let host = arguments.count > 2 ? arguments[2] : "localhost"
let calls = arguments.count > 3 ? Int(arguments[3]) ?? 20_000 : 20_000

let name = "io.github.reachabilityd.Reachability1"
let root = ObjectPath("/io/github/reachabilityd/Reachability1")
let target = name + ".Target"
let properties = "org.freedesktop.DBus.Properties"

do {
    let bus = try BusConnection(.custom(address))
    // Watch the host so that Get and Query hit a cached target.
    let watched = try bus.call(destination: name, path: root, interface: name + ".Manager", member: "WatchHost",
                               [.string(host)])
    guard case .objectPath(let hostPath) = watched.first else { throw BusError.failed("no path") }
    // Wait for the first answer (Status -1 while the first lookup is in flight).
    for _ in 0..<1000 {
        let status = try bus.call(destination: name, path: hostPath, interface: properties, member: "Get",
                                  [.string(target), .string("Status")])
        if status.first != .variant(.int32(-1)) { break }
        usleep(1000)
    }

    struct Result { let name: String; let p50: Double; let p99: Double; let perSecond: Double }
    func measure(_ label: String, _ body: () throws -> Void) throws -> Result {
        for _ in 0..<500 { try body() }  // warm up
        var samples: [Double] = []
        samples.reserveCapacity(calls)
        let start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<calls {
            let t0 = DispatchTime.now().uptimeNanoseconds
            try body()
            samples.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1000)
        }
        let total = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        samples.sort()
        return Result(name: label, p50: samples[samples.count / 2], p99: samples[samples.count * 99 / 100],
                      perSecond: Double(calls) / total)
    }

    let results = [
        try measure("Peer.Ping") {
            _ = try bus.call(destination: name, path: root, interface: "org.freedesktop.DBus.Peer", member: "Ping")
        },
        try measure("Get(Flags) root") {
            _ = try bus.call(destination: name, path: root, interface: properties, member: "Get",
                             [.string(target), .string("Flags")])
        },
        try measure("Get(Flags) host") {
            _ = try bus.call(destination: name, path: hostPath, interface: properties, member: "Get",
                             [.string(target), .string("Flags")])
        },
        try measure("GetAll(Target) host") {
            _ = try bus.call(destination: name, path: hostPath, interface: properties, member: "GetAll",
                             [.string(target)])
        },
        try measure("Query(host) cached") {
            _ = try bus.call(destination: name, path: root, interface: name + ".Manager", member: "Query",
                             [.string(host)])
        },
    ]
    let ping = results[0].p50
    print("call                    p50 µs   p99 µs   calls/s   p50/Ping")
    for r in results {
        print(r.name.padding(toLength: 22, withPad: " ", startingAt: 0)
              + String(format: " %8.1f %8.1f %9.0f %9.2f", r.p50, r.p99, r.perSecond, r.p50 / ping))
    }

    // Throughput: one client keeping 64 calls in flight.
    print("\npipelined (one client, 64 calls in flight)   calls/s")
    let pipelined: [(String, ObjectPath, String, String, [DBusValue])] = [
        ("Peer.Ping", root, "org.freedesktop.DBus.Peer", "Ping", []),
        ("Get(Flags) host", hostPath, properties, "Get", [.string(target), .string("Flags")]),
        ("Query(host) cached", root, name + ".Manager", "Query", [.string(host)]),
    ]
    for (label, path, interface, member, args) in pipelined {
        let n = calls * 2
        let start = DispatchTime.now().uptimeNanoseconds
        let errors = bus.pipeline(count: n, window: 64) { (name, path, interface, member, args) }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        print(label.padding(toLength: 22, withPad: " ", startingAt: 0)
              + String(format: " %24.0f", Double(n) / seconds) + (errors > 0 ? " (\(errors) errors)" : ""))
    }
} catch {
    FileHandle.standardError.write(Data("reachability-bench: \(error)\n".utf8))
    exit(1)
}
