import NetworkPath
import Testing

// This file imports our module and the test library only, as code written for Apple's
// platforms imports Network alone and then names DispatchQueue for `start(queue:)`: Apple's
// Network brings Dispatch with it. Were NetworkPath not to, this file would not compile.
@Suite("import NetworkPath brings Dispatch")
struct DispatchVisibleTests {
    @Test("DispatchQueue, DispatchTime and a monitor's queue are in scope")
    func dispatchNames() {
        let queue = DispatchQueue(label: "path-monitor")
        let ran = queue.sync { DispatchTime.now() }
        #expect(ran <= DispatchTime.now())
        let monitor = NWPathMonitor()
        #expect(monitor.queue == nil)
    }
}
