import AccmonSys
import AccmonSystemd
import Synchronization

/// Sends unit jobs to systemd over the system bus on a thread of its own, `accmond-units`, and posts what came of
/// each to the broker loop through a mailbox: the loop never waits on D-Bus (a call, a polkit check or a slow
/// systemd holds up this thread only).
///
/// The thread connects to the bus at its first job, and again after the connection is lost. A start with
/// ``UnitJob/runsAs`` first reads the unit's `LoadState`, `User` and `DynamicUser`; one with
/// ``UnitJob/unlessActive`` first reads that unit's `ActiveState`. A job's end is systemd's `JobRemoved` signal;
/// when its result is not `done`, the unit's `Result`, `ActiveState` and `ExecMainStatus` are read for the reason.
final class UnitJobRunner: Sendable {
    private let requests = Mutex<[UnitJob]>([])
    private let wakeup: WakeupEvent
    private let results: Mailbox<UnitJobResult>
    private let started = Mutex(false)

    init(results: Mailbox<UnitJobResult>) throws(Errno) {
        self.results = results
        wakeup = try WakeupEvent()
    }

    /// Queues jobs for the thread (started at the first call). Safe from any thread.
    func submit(_ jobs: [UnitJob]) throws(Errno) {
        guard !jobs.isEmpty else { return }
        requests.withLock { $0 += jobs }
        let start = started.withLock { started in
            defer { started = true }
            return !started
        }
        if start { try startThread(name: "accmond-units") { [self] in run() } }
        wakeup.signal()
    }

    private func run() {
        var bus: SystemdBus?
        var inFlight: [String: UnitJob] = [:]
        while true {
            var descriptors = [wakeup.descriptor]
            if let bus { descriptors.append(bus.descriptor) }
            // try?: a failed poll (it does not fail but for EINTR, retried inside) only means looking again.
            _ = try? waitForReadable(descriptors, timeoutMilliseconds: bus?.millisecondsUntilTimeout() ?? -1)
            wakeup.drain()
            let jobs = requests.withLock { pending in
                defer { pending = [] }
                return pending
            }
            var posted: [UnitJobResult] = []
            for job in jobs {
                if bus == nil {
                    do {
                        bus = try SystemdBus()
                    } catch {
                        posted.append(UnitJobResult(job: job, outcome: .failed("cannot reach systemd: \(error)")))
                        continue
                    }
                }
                do {
                    if let outcome = try send(job, on: bus!, inFlight: &inFlight) {
                        posted.append(UnitJobResult(job: job, outcome: outcome))
                    }
                } catch {
                    posted.append(UnitJobResult(job: job, outcome: .failed("\(error)")))
                    // A local failure (no D-Bus error name) is the connection's: the next job reconnects.
                    if error.name.isEmpty {
                        posted += lost(&inFlight, error)
                        bus = nil
                    }
                }
            }
            if let current = bus {
                do {
                    for removal in try current.takeJobRemovals() {
                        guard let job = inFlight.removeValue(forKey: removal.job) else { continue }
                        posted.append(UnitJobResult(job: job, outcome: Self.outcome(of: removal, job, current)))
                    }
                } catch {
                    posted += lost(&inFlight, error)
                    bus = nil
                }
            }
            if !posted.isEmpty { results.post(posted) }
        }
    }

    /// Fails every job in flight: the connection they would have ended on is gone.
    private func lost(_ inFlight: inout [String: UnitJob], _ error: SystemdBusError) -> [UnitJobResult] {
        defer { inFlight = [:] }
        return inFlight.values.map {
            UnitJobResult(job: $0, outcome: .failed("lost the system bus while the job ran: \(error)"))
        }
    }

    /// Makes the job's checks and sends it; returns its outcome when it ends here, `nil` when its job runs.
    private func send(_ job: UnitJob, on bus: SystemdBus, inFlight: inout [String: UnitJob]) throws(SystemdBusError)
        -> UnitJobOutcome?
    {
        if let uid = job.runsAs, let refusal = try Self.refusal(of: job.unit, runningAs: uid, on: bus) {
            return .refused(refusal)
        }
        if let previous = job.unlessActive {
            let state = try bus.unitProperty(previous, interface: Self.unitInterface, "ActiveState")
            if ["active", "activating", "reloading"].contains(state) { return .alreadyActive(previous) }
        }
        let path = try job.action == .start ? bus.startUnit(job.unit) : bus.stopUnit(job.unit)
        inFlight[path] = job
        return nil
    }

    private static let unitInterface = "org.freedesktop.systemd1.Unit"
    private static let serviceInterface = "org.freedesktop.systemd1.Service"

    /// Why `unit` must not be started for `uid`: it is not loaded, or does not run as that user; `nil` when it may.
    private static func refusal(of unit: String, runningAs uid: UInt32, on bus: SystemdBus) throws(SystemdBusError)
        -> String?
    {
        let load = try bus.unitProperty(unit, interface: unitInterface, "LoadState")
        guard load == "loaded" else { return "\(unit) is not loaded (LoadState \(load)): is its template installed?" }
        if try bus.unitIntegerProperty(unit, interface: serviceInterface, "DynamicUser", type: "b") != 0 {
            return "\(unit) has DynamicUser=yes, so it would not run as uid \(uid), who registered it"
        }
        let user = try bus.unitProperty(unit, interface: serviceInterface, "User")
        if user == String(uid) || (!user.isEmpty && Accounts.userID(user) == uid) { return nil }
        return "\(unit) runs as \(user.isEmpty ? "root (it has no User=)" : "'\(user)'"), not as uid \(uid), who "
            + "registered it (give the template User=%i)"
    }

    /// The outcome of an ended job; for a failed start, with what systemd says of the unit.
    private static func outcome(of removal: SystemdJobRemoved, _ job: UnitJob, _ bus: SystemdBus) -> UnitJobOutcome {
        guard removal.result != "done" else { return .done }
        var reason = "\(job.action.rawValue) job \(removal.result)"
        // try?: these only add detail to a failure already known.
        if let state = try? bus.unitProperty(job.unit, interface: unitInterface, "ActiveState") {
            reason += "; the unit is \(state)"
        }
        if let result = try? bus.unitProperty(job.unit, interface: serviceInterface, "Result"), result != "success" {
            reason += ", Result=\(result)"
        }
        if let status = try? bus.unitIntegerProperty(job.unit, interface: serviceInterface, "ExecMainStatus"),
            status != 0
        {
            reason += ", ExecMainStatus=\(status)"
        }
        return .failed(reason)
    }
}
