import Dispatch

/// Where reachctl's tasks run: on the main queue, one job at a time, in order (the task
/// that runs the command prefers this executor, and so do the tasks it starts).
///
/// Not Swift's global executor: on Linux that is libdispatch's thread pool, and the first
/// job it takes starts a pool monitor that wakes the process once a second for as long as
/// it lives. Every awaited update went there (a continuation resumes on the global
/// executor unless its task prefers another), so an idle `reachctl watch` or `metrics
/// --textfile` woke once a second; now they wake only for a change.
final class MainQueueExecutor: TaskExecutor {
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        DispatchQueue.main.async { job.runSynchronously(on: executor) }
    }

    /// Starts `body` in a task on the main queue, at the default priority. Not the main
    /// thread's: on Linux that is `userInitiated`, which every task started there inherits,
    /// and the first job of such a task that goes to libdispatch's pool (a child's, a
    /// library's) has its worker thread reniced below 0 — which an unprivileged process, or
    /// a unit without CAP_SYS_NICE, may not do: libdispatch then logs "Failed to set thread
    /// priority for worker thread … errno=13" to syslog, so into the journal of every unit
    /// that runs reachctl.
    @discardableResult
    static func start(_ body: @escaping @Sendable () async -> Void) -> Task<Void, Never> {
        Task(executorPreference: MainQueueExecutor(), priority: .medium) { await body() }
    }
}
