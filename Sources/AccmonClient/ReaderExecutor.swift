import AccmonSys
import Glibc
import Synchronization

/// Runs jobs on a connection's reader thread, between its reads of the socket (see
/// ``AccmonConnection/readerExecutor``).
///
/// A job enqueued on the reader thread itself (a task resumed by an event the thread just read) runs once the thread
/// has handed on what it read, without waking any other thread; a job from another thread wakes the reader through an
/// eventfd. Once the reader thread has ended, jobs go to the global concurrent executor.
final class ReaderExecutor: TaskExecutor {
    private struct State {
        var jobs: [UnownedJob] = []
        /// The reader thread, while it runs.
        var reader: pthread_t?
        var ended = false
    }

    private let state = Mutex(State())
    /// Readable when a job came from another thread.
    let wakeup: WakeupEvent

    init() throws(Errno) {
        wakeup = try WakeupEvent()
    }

    // Closed only here: a thread in `enqueue` may still signal it after the reader ended.
    deinit { wakeup.descriptor.close() }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        enum Next { case none, wakeReader, runElsewhere }
        let next = state.withLock { state -> Next in
            guard !state.ended else { return .runElsewhere }
            state.jobs.append(job)
            if let reader = state.reader, pthread_equal(reader, pthread_self()) != 0 { return .none }
            return .wakeReader
        }
        switch next {
        case .none: break
        case .wakeReader: wakeup.signal()
        case .runElsewhere: globalConcurrentExecutor.enqueue(ExecutorJob(job))
        }
    }

    /// Called by the reader thread when it starts.
    func readerStarted() {
        state.withLock { $0.reader = pthread_self() }
    }

    /// Runs the jobs waiting now (on the reader thread); returns whether more came meanwhile, so that a task that
    /// keeps yielding cannot keep the thread from the socket.
    func runWaitingJobs() -> Bool {
        let jobs = state.withLock { state in
            defer { state.jobs = [] }
            return state.jobs
        }
        for job in jobs { job.runSynchronously(on: asUnownedTaskExecutor()) }
        return state.withLock { !$0.jobs.isEmpty }
    }

    /// Called by the reader thread as it ends: the jobs still waiting, and all later ones, run elsewhere.
    func readerEnded() {
        let jobs = state.withLock { state in
            state.ended = true
            state.reader = nil
            defer { state.jobs = [] }
            return state.jobs
        }
        for job in jobs { globalConcurrentExecutor.enqueue(ExecutorJob(job)) }
    }
}
