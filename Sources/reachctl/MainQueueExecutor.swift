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
}
