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

    /// Blocks at least this large are mapped on their own and unmapped when freed.
    public nonisolated static let mappedFrom: Int32 = 1024 * 1024

    /// Makes every allocation of `mappedFrom` or more its own mapping, returned to the kernel
    /// the moment it is freed: a message that libdbus read whole, and refused (up to 32 MiB on
    /// dbus-daemon, 128 MiB on dbus-broker), then costs nothing once freed. glibc's own threshold starts at 128 KiB but rises to the
    /// size of any mapped block freed (up to 32 MiB), after which such blocks come from the heap
    /// and stay there; setting it once keeps it fixed. Call before anything allocates much.
    /// Wraps `mallopt(M_MMAP_THRESHOLD)`.
    public nonisolated static func mapLargeBlocks() {
        _ = mallopt(M_MMAP_THRESHOLD, mappedFrom)
    }
}
