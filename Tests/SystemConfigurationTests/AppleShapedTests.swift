import ReachabilitydClient
import SystemConfiguration
import XCTest

// The code of AppleShaped.swift (which imports SystemConfiguration alone), run; and
// Alamofire's manager read beside Apple's functions for the same names.
final class AppleShapedTests: XCTestCase {
    /// Apple's values of the old names (SCNetwork.h), and the bits of the flags they were renamed to.
    func testTheOldFlagNamesHaveApplesValues() {
        XCTAssertEqual(kSCNetworkFlagsTransientConnection, 1 << 0)
        XCTAssertEqual(kSCNetworkFlagsReachable, 1 << 1)
        XCTAssertEqual(kSCNetworkFlagsConnectionRequired, 1 << 2)
        XCTAssertEqual(kSCNetworkFlagsConnectionAutomatic, 1 << 3)
        XCTAssertEqual(kSCNetworkFlagsInterventionRequired, 1 << 4)
        XCTAssertEqual(kSCNetworkFlagsIsLocalAddress, 1 << 16)
        XCTAssertEqual(kSCNetworkFlagsIsDirect, 1 << 17)
        XCTAssertEqual(
            SCNetworkReachabilityFlags(rawValue: SCNetworkConnectionFlags(kSCNetworkFlagsIsDirect)), .isDirect)
    }

    /// The zero address from `sockaddr_in(sin_len:…)`, read with the old names: the
    /// internet's answer, the same as the flags say through their members.
    func testTheZeroAddressFromApplesInitialiserIsTheInternet() throws {
        let connected = try XCTUnwrap(isConnectedToNetwork(), "no reference or no flags")
        var zero = sockaddr_in()
        zero.sin_family = sa_family_t(AF_INET)
        let internet = try XCTUnwrap(withUnsafePointer(to: &zero) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SCNetworkReachabilityCreateWithAddress(nil, $0) }
        })
        var flags = SCNetworkReachabilityFlags()
        XCTAssertTrue(SCNetworkReachabilityGetFlags(internet, &flags))
        XCTAssertEqual(connected, flags.contains(.reachable) && !flags.contains(.connectionRequired))
    }

    /// Addresses built with Apple's memberwise initialisers keep what was given (the length
    /// byte aside) and are watched as those addresses: loopback is reachable, local, direct.
    func testApplesInitialisersMakeTheAddressGiven() throws {
        let v4 = sockaddr_in(
            sin_len: 99, sin_family: sa_family_t(AF_INET), sin_port: in_port_t(443).bigEndian,
            sin_addr: in_addr(s_addr: 0x7f00_0001), sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
        XCTAssertEqual(Int32(v4.sin_family), AF_INET)
        XCTAssertEqual(v4.sin_port, in_port_t(443).bigEndian)
        XCTAssertEqual(v4.sin_addr.s_addr, 0x7f00_0001)
        XCTAssertEqual(Int(v4.sin_len), MemoryLayout<sockaddr_in>.size)
        let v6 = sockaddr_in6(
            sin6_len: 0, sin6_family: sa_family_t(AF_INET6), sin6_port: 7, sin6_flowinfo: 3,
            sin6_addr: in6addr_loopback, sin6_scope_id: 2)
        XCTAssertEqual(Int32(v6.sin6_family), AF_INET6)
        XCTAssertEqual([v6.sin6_port, UInt16(v6.sin6_flowinfo), UInt16(v6.sin6_scope_id)], [7, 3, 2])
        XCTAssertEqual(Int(v6.sin6_len), MemoryLayout<sockaddr_in6>.size)
        let generic = sockaddr(
            sa_len: 0, sa_family: sa_family_t(AF_INET), sa_data: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))
        XCTAssertEqual(Int(generic.sa_len), MemoryLayout<sockaddr_in>.size)

        for (family, text) in [(AF_INET, "127.0.0.1"), (AF_INET6, "::1")] {
            let loopback = try XCTUnwrap(reference(forLoopback: family))
            XCTAssertTrue(loopback.description.hasSuffix("{address = \(text)}"), loopback.description)
            var flags = SCNetworkReachabilityFlags()
            XCTAssertTrue(SCNetworkReachabilityGetFlags(loopback, &flags))
            XCTAssertEqual(flags, [.reachable, .isLocalAddress, .isDirect], text)
        }
    }

    /// A watcher on a `DispatchQueue` of its own, written with the one import: scheduled,
    /// localhost's name is looked up and called back, reachable and local.
    func testAQueueWatcherWithTheOneImportHearsItsHost() throws {
        let watcher = try XCTUnwrap(QueueWatcher(host: "localhost"))
        XCTAssertTrue(watcher.start())
        defer { watcher.stop() }
        XCTAssertEqual(watcher.changed.wait(timeout: .now() + 10), .success, "no callback")
        let heard = try XCTUnwrap(watcher.flagsHeard.first)
        XCTAssertTrue(heard.isSuperset(of: [.reachable, .isLocalAddress]), "\(heard)")
    }

    /// Alamofire's manager reads a name as Alamofire's own code does on these functions:
    /// before listening, without a lookup (a name that cannot resolve, or a URL, reads as
    /// the internet, as localhost does).
    func testTheManagerReadsANameAsApplesFunctionsDo() throws {
        for name in ["localhost", "no-such-host.invalid", "https://stepik.org"] {
            let reference = try XCTUnwrap(SCNetworkReachabilityCreateWithName(nil, name))
            var flags = SCNetworkReachabilityFlags()
            XCTAssertTrue(SCNetworkReachabilityGetFlags(reference, &flags))
            let manager = try XCTUnwrap(NetworkReachabilityManager(host: name))
            XCTAssertEqual(manager.flags, flags, name)
            XCTAssertEqual(manager.status, NetworkReachabilityManager.NetworkReachabilityStatus(flags), name)
        }
    }
}
