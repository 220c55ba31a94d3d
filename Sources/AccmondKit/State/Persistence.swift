import AccmonLogging
import AccmonManifest
import AccmonProtocol
import AccmonSys

/// What the broker saves and when: the reserved ceilings of its counters, the state at most every
/// ``StateStore/writeIntervalNanoseconds`` after a change, and the state read back at start.
final class Persistence {
    private let state: BrokerState
    private let store: StateStore?
    /// Sequence numbers and connection ids below these are reserved on disk.
    private var sequenceCeiling: UInt64 = 0
    private var connectionCeiling: UInt64 = 0
    /// Whether state changed since the last save, and when that save was.
    private var isDirty = false
    /// The preserve and drop lines, at most one of each kind per user every ten seconds: a user who opens clients
    /// with new restore ids in a loop would otherwise have two lines written per connection (4 MB a minute in the
    /// hostile bench, bench/README.md).
    private var perUserLog = LogThrottle()
    private var lastSave: UInt64 = 0
    /// What waits for the state as it is now to be on disk, by the store's generation that carries it.
    private var afterSaves: [(generation: UInt64, action: () -> Void)] = []

    init(state: BrokerState, store: StateStore?) {
        self.state = state
        self.store = store
    }

    /// Something that is saved changed: a save is due within the write interval.
    func markDirty() { isDirty = true }

    /// Saves the state now (on the store's thread) and runs `action` on the loop once it is on disk, so that a reply
    /// promising something that survives a crash (a granted claim) goes out only when it would. Without a state
    /// directory, at once.
    func whenSaved(_ action: @escaping () -> Void) {
        guard let store else {
            action()
            return
        }
        let generation = save()
        afterSaves.append((generation ?? store.writtenGeneration, action))
    }

    /// Runs what waited for a save that is now on disk; called every loop turn.
    func runAfterSaves() {
        guard !afterSaves.isEmpty, let store else { return }
        let written = store.writtenGeneration
        let due = afterSaves.filter { $0.generation <= written }
        afterSaves.removeAll { $0.generation <= written }
        for item in due { item.action() }
    }

    /// Nanoseconds until the pending save is due; `nil` when none is pending.
    func nanosecondsUntilSaveDue(now: UInt64) -> UInt64? {
        guard isDirty, let store else { return nil }
        let due = lastSave &+ store.nanosecondsBetweenWrites
        return due > now ? due - now : 0
    }

    /// Keeps the reserved ceilings ahead of the counters, saving at once when they must move: numbers issued after
    /// a crash then never repeat ones issued before it. Called before each number is issued.
    func reserveNumbers() {
        guard store != nil else { return }
        let margin: UInt64 = 16
        let registry = state.registry
        guard registry.sequence + margin >= sequenceCeiling || registry.lastConnectionID + margin >= connectionCeiling
        else { return }
        sequenceCeiling = registry.sequence + StateStore.reservation
        connectionCeiling = registry.lastConnectionID + StateStore.reservation
        save(waitForDisk: true)
    }

    /// Saves when a change waits and the write interval has passed since the last save.
    func saveIfDue() {
        guard isDirty, let store, monotonicNanoseconds() &- lastSave >= store.nanosecondsBetweenWrites else { return }
        save()
    }

    /// Saves the state: on the store's writer thread, or at once when `waitForDisk` (reservations, shutdown).
    /// Returns the store's generation of the state handed to the writer thread.
    @discardableResult
    func save(waitForDisk: Bool = false) -> UInt64? {
        guard let store else { return nil }
        let now = wallClockSeconds()
        var entries = state.preserved.sessions.map { key, kept in
            PersistedState.PreservedEntry(
                key: key, clientName: kept.clientName, gids: kept.principal?.gids ?? [], memory: kept.memory,
                preservedAt: kept.sinceWallClock, relaunch: kept.relaunch, bus: kept.bus)
        }
        // Live sessions with a restore id are saved as preserved: after a crash their clients come back to them.
        for session in state.sessions.all {
            guard let key = session.restoreKey, let memory = session.memory else { continue }
            entries.append(
                PersistedState.PreservedEntry(
                    key: key, clientName: session.clientName, gids: session.principal?.gids ?? [], memory: memory,
                    preservedAt: now, relaunch: session.relaunch, bus: session.busEndpoint?.identity))
        }
        let saved = PersistedState(
            sequenceCeiling: sequenceCeiling, connectionCeiling: connectionCeiling,
            connected: state.registry.connectedByKey.map { .init(key: $0.key, accessory: $0.value) },
            sessions: entries, launches: state.launcher?.persisted(), claims: state.claims?.persisted())
        var generation: UInt64?
        if waitForDisk {
            store.saveNow(saved)
        } else {
            generation = store.save(saved)
        }
        isDirty = false
        lastSave = monotonicNanoseconds()
        return generation
    }

    /// Starts from the saved state, if any: the counters after their reserved ceilings, the connected set (to be
    /// reconciled with the sources' start-up enumerations), and the preserved sessions with the time they have left.
    func restore() {
        guard let saved = store?.load() else { return }
        state.registry = Registry(
            lastSequence: saved.sequenceCeiling, lastConnectionID: saved.connectionCeiling,
            connected: Dictionary(saved.connected.map { ($0.key, $0.accessory) }) { first, _ in first })
        let now = monotonicNanoseconds()
        let wallNow = wallClockSeconds()
        for entry in saved.sessions {
            let age = max(0, wallNow - entry.preservedAt)
            let kept = PreservedSession(
                clientName: entry.clientName, principal: ClientPrincipal(uid: entry.uid, gids: entry.gids),
                memory: entry.memory(codec: state.codec), relaunch: entry.relaunch.flatMap(LaunchTemplate.init),
                bus: entry.bus, since: now &- UInt64(min(age, 1e9) * 1e9), sinceWallClock: entry.preservedAt)
            _ = state.preserved.preserve(kept, as: RestoreKey(uid: entry.uid, restoreID: entry.restoreID))
        }
        state.launcher?.restore(saved.launches ?? [])
        if let claims = saved.claims { state.claims?.restore(claims) }
        state.logger.notice(
            .state, "state restored: \(saved.connected.count) accessories, \(saved.sessions.count) preserved sessions",
            ["seq": String(saved.sequenceCeiling)])
    }

    /// Keeps the session of a client that went away, if it registered a restore id and was subscribed.
    func preserveIfRestorable(_ session: Session) {
        guard let key = session.restoreKey, let memory = session.memory else { return }
        let kept = PreservedSession(
            clientName: session.clientName, principal: session.principal, memory: memory, relaunch: session.relaunch,
            bus: session.busEndpoint?.identity, since: monotonicNanoseconds(), sinceWallClock: wallClockSeconds())
        for dropped in state.preserved.preserve(kept, as: key) {
            let why =
                dropped.uid == key.uid && state.preserved.count(of: key.uid) >= state.preserved.limitPerUser
                ? "uid \(dropped.uid) keeps more than \(state.preserved.limitPerUser) (--max-preserved-per-user)"
                : "more than \(state.preserved.limit) are kept (--max-preserved); the oldest of the user who keeps the most"
                    + " goes"
            guard let count = perUserLog.occurrence(of: "dropped \(dropped.uid)") else { continue }
            state.logger.notice(
                .preservedSession, "preserved session dropped: \(why)\(Self.timesForThisUser(count))",
                ["restore.id": dropped.restoreID, "client.uid": String(dropped.uid)])
        }
        markDirty()
        guard let count = perUserLog.occurrence(of: "preserved \(key.uid)") else { return }
        state.logger.info(
            .preservedSession, "client gone; session preserved for its restore id\(Self.timesForThisUser(count))",
            session.metadata.merging(["restore.id": key.restoreID, "replay": String(memory.replay.count)]) { $1 })
    }

    private static func timesForThisUser(_ count: Int) -> String {
        count > 1 ? " (\(count) times for this user since the last such line)" : ""
    }

    /// Drops the preserved sessions kept past the retention time.
    func expirePreservedSessions() {
        for key in state.preserved.expire(now: monotonicNanoseconds()) {
            markDirty()
            state.logger.notice(
                .preservedSession,
                "preserved session expired after \(Int(state.configuration.restoreRetentionSeconds)) s",
                ["restore.id": key.restoreID, "client.uid": String(key.uid)])
        }
    }
}
