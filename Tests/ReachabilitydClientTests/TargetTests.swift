import Testing
import ReachabilitydClient
@testable import ReachabilityRuntime
import ReachabilityBus

@Suite("Library targets and errors, without a bus")
struct TargetTests {
    @Test("text is a host unless it is an address literal")
    func parsing() {
        #expect(ReachabilityTarget("example.com") == .host("example.com"))
        #expect(ReachabilityTarget("192.0.2.1") == .address("192.0.2.1"))
        #expect(ReachabilityTarget("2001:db8::1") == .address("2001:db8::1"))
    }

    @Test("targets are normalised as the daemon does")
    func normalised() throws {
        #expect(try ReachabilityTarget.host("Example.COM").key().target == .host("example.com"))
        #expect(try ReachabilityTarget.host("Example.COM.").key().target == .host("example.com."), "absolute: kept")
        #expect(try ReachabilityTarget.address("2001:DB8::0:1").key().target == .address("2001:db8::1"))
        #expect(try ReachabilityTarget.internet.key() == .internet)
    }

    @Test("bad input is a typed error with the daemon's message")
    func invalid() {
        #expect(throws: ReachabilityError.self) { try ReachabilityTarget.host("bad_name!").key() }
        do {
            _ = try ReachabilityTarget.address("1.2.3").key()
            Issue.record("1.2.3 was accepted")
        } catch {
            guard case .invalidTarget(let message) = error else {
                Issue.record("wrong error \(error)")
                return
            }
            #expect(message.contains("not an IPv4 or IPv6 address literal"))
        }
    }

    @Test("Alamofire's status from AFNetworking's")
    func status() {
        typealias S = NetworkReachabilityManager.NetworkReachabilityStatus
        #expect(S(.unknown) == .unknown)
        #expect(S(.notReachable) == .notReachable)
        #expect(S(.reachableViaWWAN) == .reachable(.cellular))
        #expect(S(.reachableViaWiFi) == .reachable(.ethernetOrWiFi))
    }
}

@Suite("The daemon's D-Bus errors as typed errors")
struct ErrorMappingTests {
    @Test("each service error name maps to its case, the message kept")
    func mapping() {
        let prefix = "io.github.reachabilityd.Reachability1.Error."
        #expect(ReachabilityError(BusError(name: prefix + "TooManyTargets", message: "m")) == .tooManyTargets("m"))
        #expect(ReachabilityError(BusError(name: prefix + "InvalidTarget", message: "m")) == .invalidTarget("m"))
        #expect(ReachabilityError(.limitsExceeded("m")) == .limitsExceeded("m"))
        #expect(ReachabilityError(BusError(name: "org.freedesktop.DBus.Error.ServiceUnknown", message: "m"))
                == .serviceUnavailable("io.github.reachabilityd.Reachability1: m"))
        #expect(ReachabilityError(.failed("m")) == .failed("org.freedesktop.DBus.Error.Failed: m"))
    }
}
