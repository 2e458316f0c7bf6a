import CGLib
import Glibc

/// Giving memory back after a peak. glibc's allocator keeps freed memory for
/// reuse, so a daemon that once held 16,384 targets, or a queue of calls, stays
/// at that size; `malloc_trim` returns the free pages to the kernel. It runs
/// once, from the loop, after whatever freed a lot — never on a timer.
@LoopActor
public enum Memory {
    private static var pending: SourceHandle?

    /// Returns free memory to the kernel soon (once, after the events already
    /// pending). Wraps `malloc_trim`.
    public static func trimSoon() {
        guard pending == nil else { return }
        pending = Sources.idle(priority: G_PRIORITY_DEFAULT_IDLE) {
            pending = nil
            malloc_trim(0)
        }
    }
}
