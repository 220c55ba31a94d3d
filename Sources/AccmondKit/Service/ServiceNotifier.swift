import AccmonLogging
import AccmonSys
import AccmonSystemd
import Synchronization

/// What the broker loop reports at the end of each turn, on the loop's thread (``DaemonConfiguration/onLoopTurn``).
public struct LoopTurn: Sendable, Hashable {
    /// Accessories connected now.
    public var accessories: Int
    /// Client sessions open now.
    public var clients: Int
    /// Whether the daemon has begun to stop (a signal or ``Daemon/requestStop()``): the loop ends after this turn.
    public var stopping: Bool

    /// Creates a report.
    public init(accessories: Int, clients: Int, stopping: Bool) {
        self.accessories = accessories
        self.clients = clients
        self.stopping = stopping
    }
}

/// A listening socket the service manager passed (socket activation, sd_listen_fds(3)), served instead of binding
/// ``DaemonConfiguration/socketPath``. The daemon never unlinks its path: the socket unit owns it.
public struct InheritedListener: Sendable, Hashable {
    /// The listening descriptor (fd 3).
    public var descriptor: FileDescriptor
    /// The path it is bound to, for logs and status.
    public var path: String

    /// Describes a passed socket.
    public init(descriptor: FileDescriptor, path: String) {
        self.descriptor = descriptor
        self.path = path
    }
}

/// Keeps the service manager informed (sd_notify(3)), driven by the broker loop's end-of-turn report.
///
/// Every notification is sent by a helper thread (`accmond-notify`), never by the loop: sd_notify blocks when the
/// service manager's socket queue is full, and that must not stall the clients. The loop's part is a few atomic
/// stores per turn and, when something changed, one eventfd write.
///
/// - `READY=1` after the end of the loop's first turn: the socket listens, and the coldplug that the sources
///   delivered before the loop started has been applied to the registry.
/// - `STATUS=` when the numbers of accessories or clients change, at most every ``statusSpacingNanoseconds``; the
///   loop wakes the helper for a change only outside that spacing.
/// - `WATCHDOG=1` only as the loop's answer: every half watchdog interval the helper raises a request and wakes the
///   loop through the event sink's existing eventfd; the loop answers at the end of its next turn (a heartbeat), and
///   the helper pings for that answer. A loop that no longer turns never answers, so no ping goes out and the service
///   manager restarts the daemon.
/// - `STOPPING=1` after the turn in which the daemon began to stop, or at ``finish()``.
///
/// Outside systemd (no `NOTIFY_SOCKET`) every notification is a no-op.
final class ServiceNotifier: Sendable {
    /// Sends one notification; ``ServiceManager/notify(_:)`` outside tests.
    typealias Send = @Sendable (String) throws(Errno) -> Void

    /// The least time between two `STATUS=` updates.
    static let statusSpacingNanoseconds: UInt64 = 100_000_000
    /// How long ``finish()`` waits for the helper's last notifications.
    static let finishTimeoutMilliseconds: Int32 = 2000

    private let send: Send
    private let logger: Logger
    /// Half the watchdog interval, in nanoseconds; `nil` when the watchdog is off.
    private let pingPeriod: UInt64?
    private let wakeLoop: @Sendable () -> Void
    /// Wakes the helper: the loop reported something.
    private let helperWakeup: WakeupEvent
    private let stopRequested: WakeupEvent
    private let helperStopped: WakeupEvent

    // Written by the loop thread, read by the helper.
    private let accessories = Atomic<Int>(0)
    private let clients = Atomic<Int>(0)
    private let firstTurnDone = Atomic<Bool>(false)
    private let stoppingTurnDone = Atomic<Bool>(false)
    /// The number of clients when the daemon began to stop.
    private let clientsAtStop = Atomic<Int>(0)
    /// Whether the helper has a wakeup pending: the loop writes the eventfd only when it was not.
    private let helperWakeupPending = Atomic<Bool>(false)
    /// Raised by the helper (a watchdog request), cleared by the loop when it answers.
    private let pingRequested = Atomic<Bool>(false)
    /// Raised by the loop (the heartbeat answering a request), cleared by the helper when it pings.
    private let pingAnswered = Atomic<Bool>(false)
    /// Written by the helper: before this time (monotonic ns) a new count cannot go out yet, and the helper looks
    /// at the counts again when it comes, so the loop need not wake it for a change (a storm of events then costs
    /// the helper at most one wake-up per ``statusSpacingNanoseconds``).
    private let statusRecheckAt = Atomic<UInt64>(0)
    private let helperThreadName: String

    /// Creates a notifier.
    ///
    /// - Parameters:
    ///   - watchdogMicroseconds: `WATCHDOG_USEC`, from ``ServiceManager/watchdogIntervalMicroseconds()``.
    ///   - wakeLoop: wakes the broker loop for one more turn (signals the event sink's eventfd).
    ///   - send: sends a notification.
    ///   - helperThreadName: the helper thread's name (at most 15 bytes).
    init(
        logger: Logger, watchdogMicroseconds: UInt64?, wakeLoop: @escaping @Sendable () -> Void,
        send: @escaping Send = { state throws(Errno) in try ServiceManager.notify(state) },
        helperThreadName: String = "accmond-notify"
    ) throws(Errno) {
        self.logger = logger
        self.helperThreadName = helperThreadName
        self.pingPeriod = watchdogMicroseconds.map { max($0 * 1000 / 2, 1_000_000) }
        self.wakeLoop = wakeLoop
        self.send = send
        helperWakeup = try WakeupEvent()
        stopRequested = try WakeupEvent()
        helperStopped = try WakeupEvent()
    }

    deinit {
        helperWakeup.descriptor.close()
        stopRequested.descriptor.close()
        helperStopped.descriptor.close()
    }

    /// The `STATUS=` text for `accessories` and `clients`.
    static func statusText(accessories: Int, clients: Int) -> String {
        let accessoryText = accessories == 1 ? "1 accessory" : "\(accessories) accessories"
        return "Serving \(clientsText(clients)); \(accessoryText) connected"
    }

    private static func clientsText(_ clients: Int) -> String {
        clients == 1 ? "1 client" : "\(clients) clients"
    }

    /// Sends `STATUS=text` at once, on the calling thread: for start-up, before the loop and the helper run.
    func starting(_ text: String) {
        notify("STATUS=\(text)")
    }

    /// Starts the helper thread.
    func start() throws(Errno) {
        try startThread(name: helperThreadName) { [self] in
            runHelper()
            helperStopped.signal()
        }
    }

    /// Stops the helper thread after its last notifications (`STOPPING=1` if no turn sent it), waiting at most
    /// ``finishTimeoutMilliseconds``: a service manager that does not read must not keep the daemon from exiting.
    func finish() {
        stopRequested.signal()
        guard var poller = try? Poller(capacity: 1) else { return }  // try?: without a poller, do not wait
        // try?: as for the poller.
        guard (try? poller.add(helperStopped.descriptor, interest: .readable, token: 0)) != nil else { return }
        let deadline = monotonicNanoseconds() + UInt64(Self.finishTimeoutMilliseconds) * 1_000_000
        while monotonicNanoseconds() < deadline {
            let left = Int32((deadline - monotonicNanoseconds()) / 1_000_000) + 1
            if let ready = try? poller.wait(timeoutMilliseconds: left), !ready.isEmpty { return }  // try?: EINTR: again
        }
        logger.warning(
            .serviceManager, "sd_notify: the service manager does not take notifications; exiting without waiting")
    }

    // MARK: The loop thread

    /// Called by the broker loop at the end of every turn, on its thread. Makes no system call unless something
    /// changed, and then only an eventfd write.
    func loopTurned(_ turn: LoopTurn) {
        var wake = false
        let accessoriesChanged = accessories.exchange(turn.accessories, ordering: .releasing) != turn.accessories
        let clientsChanged = clients.exchange(turn.clients, ordering: .releasing) != turn.clients
        if accessoriesChanged || clientsChanged {
            wake = monotonicNanoseconds() >= statusRecheckAt.load(ordering: .acquiring)
        }
        if !firstTurnDone.load(ordering: .relaxed) {
            firstTurnDone.store(true, ordering: .releasing)
            wake = true
        }
        if pingRequested.exchange(false, ordering: .acquiringAndReleasing) {
            pingAnswered.store(true, ordering: .releasing)
            wake = true
        }
        if turn.stopping && !stoppingTurnDone.load(ordering: .relaxed) {
            clientsAtStop.store(turn.clients, ordering: .relaxed)
            stoppingTurnDone.store(true, ordering: .releasing)
            wake = true
        }
        if wake && !helperWakeupPending.exchange(true, ordering: .acquiringAndReleasing) {
            helperWakeup.signal()
        }
    }

    // MARK: The helper thread

    private struct HelperState {
        var readySent = false
        var stoppingSent = false
        var lastStatus = ""
        var statusDue: UInt64?
        var nextStatusAllowed: UInt64 = 0
        var nextPing: UInt64?
    }

    private func runHelper() {
        do throws(Errno) {
            var poller = try Poller(capacity: 2)
            try poller.add(helperWakeup.descriptor, interest: .readable, token: 0)
            try poller.add(stopRequested.descriptor, interest: .readable, token: 1)
            runHelper(&poller)
        } catch {
            logger.error(
                .serviceManager, "sd_notify: helper thread: epoll: \(error); no READY=1, STATUS= or WATCHDOG=1")
        }
    }

    private func runHelper(_ poller: inout Poller) {
        var state = HelperState()
        state.nextPing = pingPeriod.map { monotonicNanoseconds() + $0 }
        while true {
            let now = monotonicNanoseconds()
            var deadline = state.nextPing
            if let due = state.statusDue { deadline = min(deadline ?? .max, due) }
            let timeout = deadline.map { Int32(clamping: ($0 > now ? $0 - now : 0) / 1_000_000 + 1) } ?? -1
            let ready = (try? poller.wait(timeoutMilliseconds: timeout)) ?? []  // try?: a failed wait just goes round
            let stopping = ready.contains { $0.token == 1 }
            if ready.contains(where: { $0.token == 0 }) {
                helperWakeupPending.store(false, ordering: .releasing)
                helperWakeup.drain()
            }
            handleLoopReports(&state)
            if stopping {
                if !state.stoppingSent {
                    state.stoppingSent = true
                    notify("STOPPING=1\nSTATUS=Stopping")
                }
                return
            }
            if let period = pingPeriod, let due = state.nextPing, monotonicNanoseconds() >= due {
                if pingRequested.load(ordering: .acquiring) {  // the last request is still unanswered
                    logger.warning(
                        .serviceManager,
                        "watchdog: the broker loop did not turn for \(period / 1_000_000) ms; no WATCHDOG=1 until it"
                            + " does")
                }
                pingRequested.store(true, ordering: .releasing)
                wakeLoop()
                state.nextPing = monotonicNanoseconds() + period
            }
        }
    }

    /// Sends what the loop's reports call for: READY=1, a watchdog ping, STOPPING=1, a paced STATUS= update.
    private func handleLoopReports(_ state: inout HelperState) {
        let now = monotonicNanoseconds()
        let status = Self.statusText(
            accessories: accessories.load(ordering: .acquiring), clients: clients.load(ordering: .acquiring))
        if !state.readySent && firstTurnDone.load(ordering: .acquiring) {
            state.readySent = true
            state.lastStatus = status
            scheduleRecheck(&state, now: now)
            notify("READY=1\nSTATUS=\(status)")
        }
        if pingAnswered.exchange(false, ordering: .acquiringAndReleasing) {
            notify("WATCHDOG=1")
        }
        if !state.stoppingSent && stoppingTurnDone.load(ordering: .acquiring) {
            state.stoppingSent = true
            state.statusDue = nil
            notify(
                "STOPPING=1\nSTATUS=Stopping: saying goodbye to "
                    + Self.clientsText(clientsAtStop.load(ordering: .relaxed)))
        }
        guard state.readySent && !state.stoppingSent && status != state.lastStatus else {
            // Nothing new to say: the recheck is done once its time has come (or there is nothing to recheck).
            if state.stoppingSent || now >= state.nextStatusAllowed { state.statusDue = nil }
            return
        }
        if now >= state.nextStatusAllowed {
            state.lastStatus = status
            scheduleRecheck(&state, now: now)
            notify("STATUS=\(status)")
        } else {
            state.statusDue = state.nextStatusAllowed
        }
    }

    /// After a status went out: the next may go at the end of the spacing, and the helper looks again then (the
    /// loop does not wake it for changes until that time).
    private func scheduleRecheck(_ state: inout HelperState, now: UInt64) {
        state.nextStatusAllowed = now + Self.statusSpacingNanoseconds
        state.statusDue = state.nextStatusAllowed
        statusRecheckAt.store(state.nextStatusAllowed, ordering: .releasing)
    }

    private func notify(_ state: String) {
        do throws(Errno) {
            try send(state)
        } catch {
            logger.debug(.serviceManager, "sd_notify: \(state.split(separator: "\n").joined(separator: " ")): \(error)")
        }
    }
}
