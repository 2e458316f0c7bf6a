import CGLib

/// The one thread everything runs on, as a type the compiler checks.
///
/// Everything that touches libdbus, libnm, rtnetlink sockets, GLib sources or the
/// watched targets is isolated to this actor. Its executor is the process's loop
/// context (`LoopContext.context`): a job sent to the actor is an idle source on
/// that context, run by whichever thread runs the loop — the daemon's main thread,
/// or the library's `LoopThread` inside someone else's program.
///
/// A callback from C enters the actor with ``assumeIsolated(_:_:)``, which checks that
/// the caller really is the loop's thread: GLib sources (`Callback` in MainLoop.swift;
/// rtnetlink's socket is one), libdbus's object vtable, filter, dispatch-status, watch
/// and timeout functions and pending-call notifies, libnm's signals and its client's
/// creation, GIO's for ModemManager. Each is written in a nonisolated place (a
/// `nonisolated static let`, or a type of no actor): a C closure written inside isolated
/// code is taken as isolated and runs unchecked on whatever thread calls it, while one
/// written outside can reach isolated state only through this entry. (GResolver's answer,
/// in Resolver.swift, is still such a closure written inside isolated code: issue 29.)
///
/// Two kinds of C callback do not enter, on purpose: destroy notifies (`GDestroyNotify`,
/// `DBusFreeFunction`), which only release a box and may run wherever its last owner
/// lets go; and the executor's own idle callback below, which runs the actor's jobs
/// (the runtime knows their isolation: it is the actor).
@globalActor
public actor LoopActor {
    public static let shared = LoopActor()

    private init() {}

    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        LoopExecutor.shared.asUnownedSerialExecutor()
    }

    /// Runs `body(context)` on the actor from code the compiler cannot see is on it
    /// (a C callback, whose user data is `context`); stops the process if the caller
    /// is not the loop's thread. `context` is an argument, not a capture, so that a C
    /// callback's object can enter without being sent anywhere.
    public static func assumeIsolated<Context, T>(
        _ context: Context, _ body: @LoopActor (Context) throws -> T
    ) rethrows -> T {
        typealias Body = @LoopActor (Context) throws -> T
        typealias Plain = (Context) throws -> T
        // Asks the runtime: a comparison while the loop runs (its thread runs a task on this
        // actor), else `LoopExecutor.isIsolatingCurrentContext`.
        LoopActor.shared.preconditionIsolated("reachability: loop-isolated code called off the loop's thread")
        // The check above is what `@LoopActor` promises; call the body as the plain
        // function it is (the standard library's `MainActor.assumeIsolated` does the same).
        return try withoutActuallyEscaping(body) { (escapable: @escaping Body) throws -> T in
            try unsafeBitCast(escapable, to: Plain.self)(context)
        }
    }
}

/// Runs the actor's jobs on the loop context, one at a time, in the order sent.
public final class LoopExecutor: SerialExecutor {
    public static let shared = LoopExecutor()

    private init() {}

    /// An idle source per job (`g_source_attach` is thread-safe: any thread may send a job).
    public func enqueue(_ job: consuming ExecutorJob) {
        let box = JobBox(job: UnownedJob(job), executor: asUnownedSerialExecutor())
        _ = LoopContext.attach(g_idle_source_new(), priority: G_PRIORITY_DEFAULT, Self.runJob,
                               Unmanaged.passRetained(box).toOpaque(), nil)
    }

    /// Runs one job: this is the executor itself, not a callback entering it.
    private static let runJob: GSourceFunc = { pointer in
        let box = Unmanaged<JobBox>.fromOpaque(pointer!).takeRetainedValue()
        box.job.runSynchronously(on: box.executor)
        return 0
    }

    /// The caller runs the loop context. Wraps `g_main_context_is_owner`.
    public var isCurrent: Bool { g_main_context_is_owner(LoopContext.context) != 0 }

    public func isIsolatingCurrentContext() -> Bool? { isCurrent }

    public func checkIsolated() {
        precondition(isCurrent, "reachability: loop-isolated code called off the loop's thread")
    }
}

private final class JobBox: Sendable {
    let job: UnownedJob
    let executor: UnownedSerialExecutor
    init(job: UnownedJob, executor: UnownedSerialExecutor) {
        self.job = job
        self.executor = executor
    }
}
