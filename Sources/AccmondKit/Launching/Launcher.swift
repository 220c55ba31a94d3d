import AccmonLogging
import AccmonManifest
import AccmonProtocol
import AccmonSys

/// Starts and stops systemd units for accessories (an entry's `launch`) and relaunches registered apps (a `hello`'s
/// `relaunch`), on the broker loop: it turns connections, disconnections and events recorded for preserved sessions
/// into wishes for the ``LaunchPlanner`` and the ``RelaunchLimiter``, hands their jobs to the ``UnitJobRunner``
/// thread, and takes the results at the next loop turn. Nothing here waits on D-Bus.
///
/// Instance names are accmond's: a unit started for a connection is the entry's template with the connection id as
/// its instance; a kept unit stays the one started for its accessory's earlier connection while that one is active;
/// a relaunch is the registered template with the registering uid.
final class Launcher {
    /// A connection that launched a unit: its slot, and whether the unit is kept after the connection.
    struct Launched: Sendable, Hashable {
        var slot: String
        var keep: Bool
    }

    unowned let state: BrokerState
    private let persistence: Persistence
    var planner = LaunchPlanner()
    private var relaunches = RelaunchLimiter<RestoreKey>()
    private let results: Mailbox<UnitJobResult>
    private let runner: UnitJobRunner?
    var byConnection: [ConnectionID: Launched] = [:]
    /// The unit each kept slot last had running (an instance started for an earlier connection of its accessory).
    var keptUnits: [String: String] = [:]
    /// The slot key of a kept unit starts with this (then the entry and the accessory).
    static let keptPrefix = "keep\u{1F}"
    /// The registration each relaunch slot serves, while the slot lasts.
    private var relaunchSlots: [String: RestoreKey] = [:]
    /// When the planner next has a job to send for time's sake (a hold or a retry ending).
    private var plannerDueAt: UInt64 = .max
    private var logger: Logger { state.logger }

    init(state: BrokerState, persistence: Persistence, wakeup: WakeupEvent) {
        self.state = state
        self.persistence = persistence
        results = Mailbox(wakeup: wakeup)
        runner = state.configuration.launchesUnits ? try? UnitJobRunner(results: results) : nil  // try?: nil = off
    }

    // MARK: What happens

    /// An accessory connected with `verdict`: when its entry has `launch`, its unit is wanted started.
    func accessoryConnected(_ accessory: Accessory, verdict: Authentication) {
        guard case .allowed(let entryName, _, _) = verdict,
            let launch = state.authorizer.manifest.launch(ofEntry: entryName)
        else { return }
        let connection = accessory.connectionID
        let instance = launch.unit.instance(connection.rawValue)
        let group = entryName + "\u{1F}" + accessory.accessoryID
        if launch.keep {
            let key = Self.keptPrefix + group
            planner.start(key, unit: instance, group: group, unlessActive: keptUnits[key], reassert: true)
            byConnection[connection] = Launched(slot: key, keep: true)
        } else {
            planner.start(instance, unit: instance, group: group)
            byConnection[connection] = Launched(slot: instance, keep: false)
        }
        persistence.markDirty()
    }

    /// An accessory's connection ended: its unit is wanted stopped, unless kept.
    func accessoryDisconnected(_ accessory: Accessory) {
        guard let launched = byConnection.removeValue(forKey: accessory.connectionID) else { return }
        let now = monotonicNanoseconds()
        if launched.keep { planner.connectionEnded(launched.slot, now: now) } else { planner.stop(launched.slot, now: now) }
        persistence.markDirty()
    }

    /// An event was recorded for the preserved session `key`, which registered a unit: its relaunch is wanted.
    func relaunchWanted(_ key: RestoreKey) { relaunches.want(key, now: monotonicNanoseconds()) }

    /// The client of `key` said hello with its restore id: no longer awaited, its backoff starts over.
    func reclaimed(_ key: RestoreKey) { relaunches.reclaimed(key) }

    // MARK: The loop's turn

    /// Takes the job results, starts the relaunches the limits allow and sends the jobs that are due.
    func turn() {
        let now = monotonicNanoseconds()
        for result in results.take() { finished(result, now: now) }
        if !relaunches.registrations.isEmpty {
            var limited: [(RestoreKey, RelaunchLimiter<RestoreKey>.Limit)] = []
            for key in relaunches.due(now: now, limited: &limited) { relaunch(key) }
            for (key, limit) in limited { logLimited(key, limit) }
        }
        guard planner.changed || now >= plannerDueAt else { return }
        let jobs = planner.dueJobs(now: now)
        plannerDueAt = planner.nanosecondsUntilDue(now: now).map { now + $0 } ?? .max
        guard !jobs.isEmpty else { return }
        for job in jobs {
            logger.info(.unitJob, "\(job.action.rawValue) job sent: \(job.unit)", metadata(job))
        }
        var refusal = "launching units is off in this accmond"
        if let runner {
            do {
                try runner.submit(jobs)
                return
            } catch {
                refusal = "cannot start the unit job thread: \(error)"
            }
        }
        for job in jobs { finished(UnitJobResult(job: job, outcome: .refused(refusal)), now: now) }
    }

    /// Nanoseconds until ``turn()`` has something to do for time's sake; `nil` for nothing.
    func nanosecondsUntilDue(now: UInt64) -> UInt64? {
        let planned = plannerDueAt == .max ? nil : (plannerDueAt > now ? plannerDueAt - now : 0)
        guard let relaunch = relaunches.nanosecondsUntilDue(now: now) else { return planned }
        return min(planned ?? .max, relaunch)
    }

    private func relaunch(_ key: RestoreKey) {
        guard let kept = state.preserved.sessions[key], let template = kept.relaunch else {
            relaunches.forget(key)  // claimed, expired or dropped meanwhile
            return
        }
        let manifest = state.authorizer.manifest
        guard
            manifest.mayRegisterRelaunch(
                template, uid: key.uid, gids: kept.principal?.gids ?? [], accounts: state.authorizer.accounts)
        else {
            logger.warning(
                .relaunch, "relaunch refused: the manifest no longer lets uid \(key.uid) register \(template)",
                ["restore.id": key.restoreID, "client.uid": String(key.uid), "launch.unit": template.name])
            return
        }
        let unit = template.instance(UInt64(key.uid))
        let slot = "relaunch\u{1F}\(key.uid)\u{1F}\(key.restoreID)"
        relaunchSlots[slot] = key
        planner.start(slot, unit: unit, runsAs: key.uid, reassert: true, oneShot: true)
        logger.info(
            .relaunch, "relaunching \(unit): events wait for the preserved session",
            ["restore.id": key.restoreID, "client.uid": String(key.uid), "launch.unit": unit,
             "replay": String(kept.memory.replay.count)])
    }

    private func logLimited(_ key: RestoreKey, _ limit: RelaunchLimiter<RestoreKey>.Limit) {
        let settings = relaunches.settings
        let why =
            switch limit {
            case .backoff: "the backoff since its last relaunch has not passed (it did not come back)"
            case .perMinute: "it was relaunched \(settings.perMinute) times in the last minute"
            case .awaiting: "\(settings.maximumAwaiting) relaunched apps have not said hello yet"
            }
        logger.notice(
            .relaunch, "relaunch rate-limited: \(why); it waits",
            ["restore.id": key.restoreID, "client.uid": String(key.uid), "relaunch.limit": "\(limit)"])
    }

    private func finished(_ result: UnitJobResult, now: UInt64) {
        let job = result.job
        let finish = planner.finished(result, now: now)
        persistence.markDirty()
        if let key = relaunchSlots[job.slot] {
            if finish == .gaveUp { relaunches.startFailed(key) }
            if planner.slots[job.slot] == nil { relaunchSlots[job.slot] = nil }
        }
        if job.slot.hasPrefix(Self.keptPrefix) {
            switch result.outcome {
            case .done where job.action == .start: keptUnits[job.slot] = job.unit
            case .alreadyActive(let unit): keptUnits[job.slot] = unit
            default: break
            }
            if planner.slots[job.slot] == nil { keptUnits[job.slot] = nil }
        }
        var details = metadata(job)
        switch (result.outcome, finish) {
        case (.done, _):
            logger.info(.unitJob, "\(job.action.rawValue) job done: \(job.unit)", details)
        case (.alreadyActive(let unit), _):
            logger.info(.unitJob, "\(unit) is still active: kept for this connection, nothing started", details)
        case (.failed(let reason), .willRetry(let after)), (.refused(let reason), .willRetry(let after)):
            details["launch.failures"] = String(planner.slots[job.slot]?.failures ?? 0)
            logger.warning(
                .unitJob, "\(job.action.rawValue) \(job.unit) failed: \(reason); retrying in \(after / 1_000_000) ms",
                details)
        case (.failed(let reason), _), (.refused(let reason), _):
            logger.error(.unitJob, "\(job.action.rawValue) \(job.unit) failed: \(reason); giving up", details)
        }
    }

    private func metadata(_ job: UnitJob) -> [String: String] {
        var metadata = ["launch.unit": job.unit]
        if let uid = job.runsAs { metadata["client.uid"] = String(uid) }
        return metadata
    }
}
