import Dispatch
import Synchronization
import Testing
@testable import ReachabilitydClientCore
import ReachabilityLoop

@Suite("The library's loop: what waits for it and what does not")
struct LoopTests {
    /// Holds the loop's thread busy until released (or until `limit` passes); says whether it was released.
    private final class BusyLoop: Sendable {
        private let release = DispatchSemaphore(value: 0)
        private let held = DispatchSemaphore(value: 0)
        private let done = DispatchSemaphore(value: 0)
        private let outcome = Mutex<Bool?>(nil)

        init(limit: Double = 10) {
            LoopThread.start()
            Task { @LoopActor [self] in
                self.held.signal()
                let released = self.release.wait(timeout: .now() + limit) == .success
                self.outcome.withLock { $0 = released }
                self.done.signal()
            }
            held.wait()
        }

        /// Lets the loop go; true when it was still waiting for this (nothing else needed it meanwhile).
        func finish() -> Bool {
            release.signal()
            done.wait()
            return outcome.withLock { $0 } ?? false
        }
    }

    @Test("creating a manager needs nothing from the loop (nor from the bus)", arguments: [
        ReachabilityMode.inProcess, .daemon, nil,
    ])
    func creationDoesNotWait(mode: ReachabilityMode?) throws {
        let loop = BusyLoop()
        let manager = try NetworkReachabilityManager(target: .address("127.0.0.1"), mode: mode)
        let unblocked = loop.finish()
        #expect(unblocked, "NetworkReachabilityManager.init waited for the loop's thread")
        #expect(manager.target == .address("127.0.0.1"))
    }

    @Test("the mode asked for is the mode, once the loop has chosen it")
    func modeAskedFor() throws {
        let manager = try NetworkReachabilityManager(target: .address("127.0.0.1"), mode: .inProcess)
        #expect(manager.mode == .inProcess)
    }

    @Test("code isolated to the loop runs on the loop's thread, and only there")
    func isolation() async {
        LoopThread.start()
        #expect(!LoopExecutor.shared.isCurrent)
        let onLoop = await Task { @LoopActor in LoopExecutor.shared.isCurrent }.value
        #expect(onLoop)
    }
}
