import Dispatch
import Synchronization

/// A value that threads share, behind a lock ThreadSanitizer sees.
///
/// The value lives in a `Mutex` (what makes this type Sendable by the compiler's
/// check), taken only inside `DispatchQueue.sync` on a private queue, so it is
/// never contended. Why not the `Mutex` alone: on Linux its contended path
/// (futex wait and wake) runs in the standard library, which is not built for
/// ThreadSanitizer, so the ordering it gives is invisible to it exactly when
/// two threads meet; libdispatch's is seen.
package final class Guarded<Value: Sendable>: Sendable {
    private let queue = DispatchQueue(label: "io.github.reachabilityd.guarded")
    private let value: Mutex<Value>

    package init(_ value: Value) { self.value = Mutex(value) }

    /// Runs `body` with the value, exclusively. `body` must not use this value again.
    package func withLock<Result: Sendable>(_ body: (inout Value) -> Result) -> Result {
        queue.sync { value.withLock { body(&$0) } }
    }
}
