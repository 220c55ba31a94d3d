/// Decides which unit jobs to send to systemd, and when. Pure: the caller gives the time.
///
/// Each unit accmond manages is a *slot* with a desired state (started or stopped) and what systemd was last told.
/// Changes coalesce as a suspended client's events do: a start and a stop that meet before the start was sent cancel
/// out (the slot is gone, no job); a slot with a job in flight waits for its result before its next job, so the
/// jobs of one unit never overtake each other; only the latest desired state is sent. Besides:
///
/// - **Flapping.** Slots of one *group* (an entry and an accessory) share a hold: when a connection whose start was
///   sent ends within ``Settings/flapWindowNanoseconds``, the group's starts are held for 1 s, then 2 s, 4 s... up to
///   ``Settings/maximumHoldNanoseconds``; a connection that outlasts the window, or a minute without a hold, resets it. Starts wanted during a hold
///   wait, and the stops of their unsent starts cancel them: 100 plug cycles in 10 s send a handful of jobs, and the
///   accessory's last state is reached once the hold ends.
/// - **Failures.** A failed job is retried after 1 s, 2 s, 4 s..., at most ``Settings/retries`` times while it is
///   still wanted; then the slot gives up (``Finish/gaveUp``). One-shot slots (relaunches) are not retried: the
///   ``RelaunchLimiter`` decides when to try again.
/// - **A global cap** on jobs in flight, ``Settings/maximumPendingJobs``; the rest wait in the order they were wanted.
struct LaunchPlanner {
    struct Settings: Sendable {
        var maximumPendingJobs = 16
        var retries = 3
        var retryNanoseconds: UInt64 = 1_000_000_000
        var flapWindowNanoseconds: UInt64 = 2_000_000_000
        var firstHoldNanoseconds: UInt64 = 1_000_000_000
        var maximumHoldNanoseconds: UInt64 = 8_000_000_000
    }

    enum State: String, Codable, Sendable, Hashable { case started, stopped }

    struct Slot: Sendable {
        var unit: String
        var want: State
        /// What systemd last did at accmond's request; `nil` before anything was.
        var told: State?
        /// A start is due although ``told`` is started (a kept unit's new connection, a relaunch).
        var reassert = false
        /// One-shot slots (relaunches) end once their start is done or failed: nothing stops them, and whether to try
        /// again after a failure is the relaunch limiter's decision (a crashing app is not retried behind its back).
        var oneShot = false
        var inFlight: UnitJob?
        var failures = 0
        /// No job before this time (a retry's backoff).
        var notBefore: UInt64 = 0
        var group: String?
        var runsAs: UInt32?
        var unlessActive: String?
        /// When the slot's last start was sent.
        var startSentAt: UInt64?
        /// Orders the slots' jobs by when they were wanted.
        var serial: UInt64 = 0
    }

    struct Group: Sendable {
        var level = 0
        var holdUntil: UInt64 = 0
    }

    /// What a finished job did to its slot, for the log.
    enum Finish: Sendable, Hashable {
        case succeeded
        /// The job failed; another is sent after the given nanoseconds.
        case willRetry(afterNanoseconds: UInt64)
        /// The job failed too often, or was refused: the slot gave up.
        case gaveUp
        /// The result came for a slot that no longer waits for it.
        case unexpected
    }

    let settings: Settings
    /// How long after its last hold a group's flap level is kept.
    static let groupMemoryNanoseconds: UInt64 = 60_000_000_000
    private(set) var slots: [String: Slot] = [:]
    private(set) var groups: [String: Group] = [:]
    private(set) var pendingJobs = 0
    private var nextSerial: UInt64 = 0
    /// Whether something changed since ``dueJobs(now:)`` last looked.
    private(set) var changed = false

    init(settings: Settings = Settings()) { self.settings = settings }

    // MARK: What accmond wants

    /// Wants `unit` started under `key`. With `reassert`, a start is sent even when systemd already started it (a
    /// kept unit for a new connection: it may have stopped meanwhile).
    mutating func start(
        _ key: String, unit: String, group: String? = nil, runsAs: UInt32? = nil, unlessActive: String? = nil,
        reassert: Bool = false, oneShot: Bool = false
    ) {
        var slot = slots[key] ?? Slot(unit: unit, want: .stopped)
        if slot.want != .started || reassert { slot.failures = 0 }
        slot.unit = unit
        slot.want = .started
        slot.group = group
        slot.runsAs = runsAs
        slot.unlessActive = unlessActive
        slot.oneShot = oneShot
        if reassert && slot.told == .started { slot.reassert = true }
        slot.serial = takeSerial()
        slots[key] = slot
        changed = true
    }

    /// Wants the unit of `key` stopped; the connection it was started for ended at `now`. A start never sent is
    /// cancelled.
    mutating func stop(_ key: String, now: UInt64) {
        guard var slot = slots[key] else { return }
        connectionEnded(key, now: now)
        slot.want = .stopped
        slot.reassert = false
        slot.failures = 0
        slot.notBefore = 0
        slot.serial = takeSerial()
        slots[key] = slot
        removeIfSettled(key)
        changed = true
    }

    /// The connection a slot of a group was (re)started for ended, without a stop (a kept unit): feeds the flap hold.
    mutating func connectionEnded(_ key: String, now: UInt64) {
        guard let slot = slots[key], let name = slot.group, let sent = slot.startSentAt else { return }
        var group = groups[name] ?? Group()
        if now &- sent < settings.flapWindowNanoseconds {
            group.level += 1
            let hold = settings.firstHoldNanoseconds << UInt64(min(group.level - 1, 32))
            group.holdUntil = now + min(hold, settings.maximumHoldNanoseconds)
        } else {
            group.level = 0
        }
        groups[name] = group
    }

    /// Forgets `key` without a job (a kept unit accmond no longer tracks).
    mutating func forget(_ key: String) {
        guard let slot = slots[key], slot.inFlight == nil else { return }
        slots[key] = nil
    }

    /// Puts back a slot saved before a restart, with what systemd was told: a start or a stop not yet done is sent.
    mutating func restore(
        _ key: String, unit: String, group: String?, want: State, told: State?, unlessActive: String? = nil
    ) {
        slots[key] = Slot(
            unit: unit, want: want, told: told, group: group, unlessActive: unlessActive, serial: takeSerial())
        changed = true
    }

    // MARK: Jobs

    /// The jobs to send now, oldest wish first, within the cap; they count as in flight until ``finished(_:now:)``.
    mutating func dueJobs(now: UInt64) -> [UnitJob] {
        changed = false
        // A group's flapping is forgotten a while after its last hold ended.
        if !groups.isEmpty { groups = groups.filter { $0.value.holdUntil &+ Self.groupMemoryNanoseconds > now } }
        guard pendingJobs < settings.maximumPendingJobs else { return [] }
        let candidates = slots.filter { needsJob($0.value, now: now) }.sorted { $0.value.serial < $1.value.serial }
        var jobs: [UnitJob] = []
        for (key, var slot) in candidates {
            guard pendingJobs < settings.maximumPendingJobs else { break }
            let action: UnitAction = slot.want == .started ? .start : .stop
            let job = UnitJob(
                slot: key, action: action, unit: slot.unit, runsAs: action == .start ? slot.runsAs : nil,
                unlessActive: action == .start ? slot.unlessActive : nil)
            slot.inFlight = job
            if action == .start {
                slot.startSentAt = now
                slot.reassert = false
            }
            slots[key] = slot
            pendingJobs += 1
            jobs.append(job)
        }
        return jobs
    }

    /// Takes a job's result.
    mutating func finished(_ result: UnitJobResult, now: UInt64) -> Finish {
        let key = result.job.slot
        guard var slot = slots[key], slot.inFlight == result.job else { return .unexpected }
        slot.inFlight = nil
        pendingJobs -= 1
        changed = true
        var finish = Finish.succeeded
        switch result.outcome {
        case .done, .alreadyActive:
            slot.told = result.job.action == .start ? .started : .stopped
            slot.failures = 0
        case .failed where slot.failures < settings.retries && !slot.oneShot:
            slot.failures += 1
            let delay = settings.retryNanoseconds << UInt64(slot.failures - 1)
            slot.notBefore = now + delay
            finish = .willRetry(afterNanoseconds: delay)
        case .failed, .refused:
            // Given up: accmond stops wanting what systemd did not do. A stop that keeps failing is taken as done: the
            // slot is forgotten rather than kept forever.
            if result.job.action == .stop { slot.told = .stopped }
            slot.want = slot.told ?? .stopped
            slot.reassert = false
            slot.failures = 0
            finish = .gaveUp
        }
        slots[key] = slot
        if slot.oneShot, slot.inFlight == nil, !needsJob(slot, now: .max) || finish == .gaveUp {
            slots[key] = nil
        } else {
            removeIfSettled(key)
        }
        return finish
    }

    /// Nanoseconds until a held or backed-off job may go; `nil` when none waits for time.
    func nanosecondsUntilDue(now: UInt64) -> UInt64? {
        guard pendingJobs < settings.maximumPendingJobs else { return nil }
        var due: UInt64?
        for slot in slots.values where slot.inFlight == nil && wantsJob(slot) {
            let at = max(slot.notBefore, slot.want == .started ? holdUntil(slot) : 0)
            due = min(due ?? .max, at > now ? at - now : 0)
        }
        return due
    }

    // MARK: Internals

    private func wantsJob(_ slot: Slot) -> Bool {
        switch slot.want {
        case .started: slot.told != .started || slot.reassert
        case .stopped: slot.told == .started
        }
    }

    private func holdUntil(_ slot: Slot) -> UInt64 {
        slot.group.flatMap { groups[$0]?.holdUntil } ?? 0
    }

    private func needsJob(_ slot: Slot, now: UInt64) -> Bool {
        slot.inFlight == nil && wantsJob(slot) && now >= slot.notBefore
            && (slot.want == .stopped || now >= holdUntil(slot))
    }

    /// Drops a slot that is stopped (or never started) with nothing in flight.
    private mutating func removeIfSettled(_ key: String) {
        guard let slot = slots[key], slot.inFlight == nil, slot.want == .stopped, slot.told != .started else { return }
        slots[key] = nil
    }

    private mutating func takeSerial() -> UInt64 {
        nextSerial += 1
        return nextSerial
    }
}
