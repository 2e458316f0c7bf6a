import Dispatch
import ReachabilityLoop
import Synchronization

/// A timer for programs on the runtime (reachctl's timeouts and heartbeats): it runs on the
/// library's loop (a GLib timeout, where the runtime's own timers are) and hands `body` to
/// `queue`.
///
/// Not libdispatch's timers (`asyncAfter`, `DispatchSource.makeTimerSource`): on Linux they
/// are driven by libdispatch's manager thread, which it starts at the user-interactive
/// quality of service and so tries to renice below 0 — refused to an unprivileged process, or
/// to a unit without `CAP_SYS_NICE`, and then logged ("Failed to set thread priority for
/// worker thread … errno=13") into the journal of every unit that runs reachctl.
package final class LoopTimer: Sendable {
    private struct State: @unchecked Sendable {
        // Only touched on the loop (the handle is the loop's), under the lock.
        var handle: SourceHandle?
        var cancelled = false
    }

    private let state = Mutex(State())

    private init() {}

    /// Calls `body` on `queue` once, `seconds` from now (up to a year), unless cancelled first.
    package static func after(seconds: Double, on queue: DispatchQueue,
                              _ body: @escaping @Sendable () -> Void) -> LoopTimer {
        let timer = LoopTimer()
        let milliseconds = max(0, (seconds * 1000).rounded(.up))
        Runtime.send { _ in
            // The source holds the timer until it fires or is cancelled: a timer nobody keeps
            // still fires, as `asyncAfter` does.
            let fire: @LoopActor () -> Void = {
                guard !timer.state.withLock({ $0.cancelled }) else { return }
                queue.async(execute: body)
            }
            if milliseconds <= Double(UInt32.max) {
                timer.keep(Sources.after(milliseconds: UInt32(milliseconds), fire))
            } else {
                // Beyond 49 days of milliseconds: whole seconds (GLib's seconds timeout).
                timer.keep(Sources.every(seconds: UInt32(min(seconds.rounded(.up), Double(UInt32.max)))) {
                    fire()
                    return false
                })
            }
        }
        return timer
    }

    /// Calls `body` on `queue` every `seconds`, until cancelled.
    package static func every(seconds: UInt32, on queue: DispatchQueue,
                              _ body: @escaping @Sendable () -> Void) -> LoopTimer {
        let timer = LoopTimer()
        Runtime.send { _ in
            timer.keep(Sources.every(seconds: seconds) {
                guard !timer.state.withLock({ $0.cancelled }) else { return false }
                queue.async(execute: body)
                return true
            })
        }
        return timer
    }

    /// Stops it: the loop hands `body` to `queue` no more (a call it handed over already may
    /// still run there).
    package func cancel() {
        let handle = state.withLock { state -> SourceHandle? in
            state.cancelled = true
            defer { state.handle = nil }
            return state.handle
        }
        if let handle { Runtime.send { _ in handle.cancel() } }
    }

    @LoopActor private func keep(_ handle: SourceHandle) {
        let keep = state.withLock { state -> Bool in
            if !state.cancelled { state.handle = handle }
            return !state.cancelled
        }
        if !keep { handle.cancel() }
    }
}
