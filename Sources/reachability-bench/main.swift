import Foundation
import ReachabilityBus
import ReachabilityLoop

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

// Blocking calls only: this thread owns the loop (so the connection may be used), never runs it.
LoopActor.assumeIsolated(MainLoop()) { _ in
do {
    let bus = try BusConnection(.custom(address), logger: SystemLog(program: "reachability-bench").logger)
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
    // The calls take turns (Ping, Get, …, Ping, Get, …), so that every kind sees the same
    // machine: measured one kind after another, a drift in the machine's speed between
    // phases (this VM's round trip moves by 30% from minute to minute) became a ratio.
    let kinds: [(String, () throws -> Void)] = [
        ("Peer.Ping", {
            _ = try bus.call(destination: name, path: root, interface: "org.freedesktop.DBus.Peer", member: "Ping")
        }),
        ("Get(Flags) root", {
            _ = try bus.call(destination: name, path: root, interface: properties, member: "Get",
                             [.string(target), .string("Flags")])
        }),
        ("Get(Flags) host", {
            _ = try bus.call(destination: name, path: hostPath, interface: properties, member: "Get",
                             [.string(target), .string("Flags")])
        }),
        ("GetAll(Target) host", {
            _ = try bus.call(destination: name, path: hostPath, interface: properties, member: "GetAll",
                             [.string(target)])
        }),
        ("Query(host) cached", {
            _ = try bus.call(destination: name, path: root, interface: name + ".Manager", member: "Query",
                             [.string(host)])
        }),
    ]
    for _ in 0..<500 { for (_, body) in kinds { try body() } }  // warm up
    var samples = kinds.map { _ in [Double]() }
    var busy = kinds.map { _ in 0.0 }
    for _ in 0..<calls {
        for (k, (_, body)) in kinds.enumerated() {
            let t0 = DispatchTime.now().uptimeNanoseconds
            try body()
            let microseconds = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1000
            samples[k].append(microseconds)
            busy[k] += microseconds
        }
    }
    let results = kinds.indices.map { k in
        let sorted = samples[k].sorted()
        return Result(name: kinds[k].0, p50: sorted[sorted.count / 2], p99: sorted[sorted.count * 99 / 100],
                      perSecond: Double(calls) / (busy[k] / 1e6))
    }
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
}
