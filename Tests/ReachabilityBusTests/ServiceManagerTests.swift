import Glibc
import Testing
import ReachabilityLoop

/// systemd's notification protocol as the daemon speaks it: which environment turns the
/// watchdog on, how often it is fed, and a datagram that arrives (no systemd needed: a
/// socket of the test's own stands in for the manager's).
@Suite("The service manager's watchdog")
struct ServiceManagerTests {
    init() { LoopThread.start() }

    static func environment(_ values: [String: String]) -> (String) -> String? { { values[$0] } }

    @Test("a watchdog is fed only where the manager asks for one, for this process")
    @LoopActor
    func watchdogFromTheEnvironment() {
        let socket = "/run/example-notify"
        #expect(ServiceManager(environment: Self.environment([:])).watchdogMicroseconds == nil)
        #expect(ServiceManager(environment: Self.environment(["WATCHDOG_USEC": "30000000"])).watchdogMicroseconds
                    == nil, "no socket to feed it through")
        #expect(ServiceManager(environment: Self.environment(["NOTIFY_SOCKET": socket, "WATCHDOG_USEC": "30000000"]))
                    .watchdogMicroseconds == 30_000_000)
        #expect(ServiceManager(environment: Self.environment(["NOTIFY_SOCKET": socket, "WATCHDOG_USEC": "30000000",
                                                              "WATCHDOG_PID": "\(getpid())"]))
                    .watchdogMicroseconds == 30_000_000)
        #expect(ServiceManager(environment: Self.environment(["NOTIFY_SOCKET": socket, "WATCHDOG_USEC": "30000000",
                                                              "WATCHDOG_PID": "\(getpid() + 1)"]))
                    .watchdogMicroseconds == nil, "another process's watchdog")
        #expect(ServiceManager(environment: Self.environment(["NOTIFY_SOCKET": socket, "WATCHDOG_USEC": "0"]))
                    .watchdogMicroseconds == nil)
        #expect(ServiceManager(environment: Self.environment([:])).feedWatchdog() == nil)
    }

    @Test("fed at half the timeout, in whole seconds, at least one")
    func feedingPeriod() {
        #expect(ServiceManager.feedingPeriod(watchdogMicroseconds: 30_000_000) == 15)
        #expect(ServiceManager.feedingPeriod(watchdogMicroseconds: 3_000_000) == 1)
        #expect(ServiceManager.feedingPeriod(watchdogMicroseconds: 500_000) == 1)
    }

    @Test("WATCHDOG=1 reaches the socket, named by a path or as an abstract socket")
    @LoopActor
    func datagramArrives() throws {
        for abstract in [false, true] {
            let name = "reachabilityd-test-notify-\(getpid())-\(abstract)"
            let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            try #require(fd >= 0)
            defer { close(fd) }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let path = abstract ? "\0" + name : "/tmp/" + name
            let bytes = Array(path.utf8)
            withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
            let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count + (abstract ? 0 : 1))
            if !abstract { unlink(path) }
            defer { if !abstract { unlink(path) } }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
            }
            try #require(bound == 0, "bind: \(String(cString: strerror(errno)))")
            let manager = ServiceManager(environment: Self.environment([
                "NOTIFY_SOCKET": abstract ? "@" + name : path, "WATCHDOG_USEC": "4000000"]))
            #expect(manager.feedWatchdog() == 2)
            var buffer = [UInt8](repeating: 0, count: 64)
            var timeout = timeval(tv_sec: 5, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            let received = recv(fd, &buffer, buffer.count, 0)
            try #require(received > 0, "nothing arrived within 5 s")
            #expect(String(decoding: buffer[0..<received], as: UTF8.self) == "WATCHDOG=1")
        }
    }
}
