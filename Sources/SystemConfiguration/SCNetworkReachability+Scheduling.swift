import CoreFoundation
import Dispatch
import Foundation
import ReachabilityRuntime

// A reference's callback and its scheduling on a dispatch queue or run loops: what the
// runtime answers goes to the callback there, never after unscheduling has returned.

extension SCNetworkReachability {
    // MARK: Callback

    func setCallback(_ callback: SCNetworkReachabilityCallBack?, _ context: SCNetworkReachabilityContext?) {
        var new = context ?? SCNetworkReachabilityContext()
        if let retain = new.retain, let info = new.info { new.info = UnsafeMutableRawPointer(mutating: retain(info)) }
        let old = withState { state in
            defer {
                state.callback = callback
                state.context = Context(new)
            }
            return state.context
        }.value
        if let release = old.release, let info = old.info { release(info) }
        // A callback already running on another thread finishes before this returns.
        callout.lock()
        callout.unlock()
    }

    // MARK: Scheduling

    /// Starts delivering to `queue` or to run loops (`loop`); fails when already scheduled
    /// on a queue, or on run loops when `queue` is given.
    package func schedule(queue: CalloutQueue?, loop: (CFRunLoop, CFString)?) -> Bool {
        let id = Runtime.newID()
        // The system holds this reference while it is scheduled, as Apple's does: through
        // `hold`, which unscheduling empties at once (the runtime lets the subscription go
        // later, on its own thread).
        let hold = Hold(self)
        // Answers come on the runtime's thread, where `received` decides (Apple's rule, under
        // this reference's lock) before anything is handed to the queue or run loop. A watch
        // that cannot be set up, or ends (no way to watch the network, the daemon's limit
        // reached), answers "not reachable".
        let subscription = Subscription(id: id, key, mode: Self.requestedMode, on: nil) { result in
            switch result {
            case .success(let state): hold.reference?.received(state.flags, subscription: id)
            case .failure: hold.reference?.received([], subscription: id)
            }
        }
        let outcome: Bool? = withState { state in
            if state.subscription != nil {
                // Another run loop for a reference scheduled on run loops is fine; anything else is not.
                guard state.queue == nil, let loop, !state.runLoops.isEmpty else { return false }
                if !state.runLoops.contains(where: { $0.isSame(loop) }) {
                    state.runLoops.append(ScheduledLoop(loop: loop.0, mode: loop.1))
                }
                return true
            }
            state.queue = queue
            state.runLoops = loop.map { [ScheduledLoop(loop: $0.0, mode: $0.1)] } ?? []
            state.subscription = subscription
            state.hold = hold
            state.callouts.scheduled(isName: isName)
            return nil
        }
        if let outcome { return outcome || SCStatus.fail() }
        subscription.start()
        return true
    }

    /// Stops delivering. With `loop`, only to that run loop and mode (the reference stays
    /// scheduled while another remains). Returns once no callback runs on another thread.
    package func unschedule(queue: Bool, loop: (CFRunLoop, CFString)?) -> Bool {
        let ended: Subscription<FeedKey>?? = withState { state in
            guard let subscription = state.subscription, (state.queue != nil) == queue else { return nil }
            if let loop {
                state.runLoops.removeAll { $0.isSame(loop) }
                guard state.runLoops.isEmpty else { return .some(nil) }
            }
            state.subscription = nil
            state.queue = nil
            state.runLoops = []
            state.callouts.unscheduled()
            state.hold?.reference = nil
            state.hold = nil
            return subscription
        }
        guard let ended else { return SCStatus.fail() }
        if let subscription = ended {
            subscription.cancel()
            callout.lock()
            callout.unlock()
        }
        return true
    }

    /// An answer from the runtime (on its thread): decides, and hands the callback to the
    /// queue or run loop. Unknown (`nil`: the daemon left, a lookup in flight) is no answer.
    private func received(_ answer: SCNetworkReachabilityFlags?, subscription id: Int) {
        // Unknown after an answer (the service stopped, was removed, or was ended by its
        // watchdog) is "not reachable": Apple's flags have no unknown, and the last answer must
        // not stay as if it still held. Unknown before the first answer is no news.
        let decided: (flags: SCNetworkReachabilityFlags, queue: CalloutQueue?, loop: ScheduledLoop?)? = withState {
            state in
            guard state.subscription?.id == id,
                let flags = answer ?? (state.callouts.flags != nil ? [] : nil),
                state.callouts.received(flags)
            else { return nil }
            return (flags, state.queue, state.runLoops.first)
        }
        guard let decided else { return }
        let flags = decided.flags
        let target: (CalloutQueue?, ScheduledLoop?)? = (decided.queue, decided.loop)
        // The block holds the reference weakly: one still waiting on the queue or run loop when
        // the reference is unscheduled and released does not keep it (and its context) alive
        // until the queue gets to it, or for ever on a run loop that no longer runs. Only a
        // block already running holds it, until it returns, as Apple's in-flight callouts do.
        switch target {
        case (let queue?, _)?:
            queue.async { [weak self] in self?.perform(flags, subscription: id) }
        case (nil, let scheduled?)?:
            // A block for that run loop in that mode; waking it runs the block there.
            CFRunLoopPerformBlock(scheduled.loop, scheduled.mode) { [weak self] in
                self?.perform(flags, subscription: id)
            }
            CFRunLoopWakeUp(scheduled.loop)
        default:
            break
        }
    }

    /// Runs the callback, unless the reference was unscheduled (or scheduled anew) meanwhile.
    private func perform(_ flags: SCNetworkReachabilityFlags, subscription id: Int) {
        callout.lock()
        defer { callout.unlock() }
        guard let (callback, context) = withState({ state in
            state.subscription?.id == id ? state.callback.map { ($0, state.context) } : nil
        }) else { return }
        let value = context.value
        var info = value.info
        if let retain = value.retain, let original = info { info = UnsafeMutableRawPointer(mutating: retain(original)) }
        callback(self, flags, info)
        if let release = value.release, let info { release(info) }
    }
}
