import Testing

@testable import ReachabilityCore

@Suite("NetworkManager of another network namespace")
struct NetworkManagerNamespaceTests {
    @Test("its own namespace: every device is a link, or all but one that comes or goes")
    func own() {
        let links: Set = ["lo", "eth0", "wlan0"]
        #expect(!NetworkManagerNamespace.isForeign(deviceInterfaces: ["lo", "eth0", "wlan0"], linkNames: links))
        #expect(!NetworkManagerNamespace.isForeign(deviceInterfaces: ["lo", "eth0", "wlan0", "usb0"], linkNames: links))
        #expect(!NetworkManagerNamespace.isForeign(deviceInterfaces: ["lo", "eth0"], linkNames: links))
    }

    @Test("another namespace: none of its devices but loopback is a link here, and a link here is none of them")
    func foreign() {
        #expect(NetworkManagerNamespace.isForeign(deviceInterfaces: ["lo", "eth0", "wlan0"], linkNames: ["lo", "host0"]))
        #expect(NetworkManagerNamespace.isForeign(deviceInterfaces: ["eth0"], linkNames: ["lo", "veth1"]))
    }

    @Test("one side has not heard yet: the only NIC unplugged, or replaced, is not another namespace")
    func unheard() {
        // The kernel removed eth0; NetworkManager still lists it.
        #expect(!NetworkManagerNamespace.isForeign(deviceInterfaces: ["lo", "eth0"], linkNames: ["lo"]))
        // Nothing here but loopback: no evidence either way.
        #expect(!NetworkManagerNamespace.isForeign(deviceInterfaces: ["lo", "eth0", "wlan0"], linkNames: ["lo"]))
    }

    @Test("nothing to compare: NetworkManager with no device, or loopback only, is not foreign")
    func nothing() {
        #expect(!NetworkManagerNamespace.isForeign(deviceInterfaces: [], linkNames: ["lo"]))
        #expect(!NetworkManagerNamespace.isForeign(deviceInterfaces: ["lo"], linkNames: ["lo", "eth0"]))
    }
}
