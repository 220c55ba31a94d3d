import AccmonTestSupport
import Testing

@testable import AccmondKit

/// The launch planner: desired states per unit, coalesced; flap holds; retries; the cap on jobs in flight.
@Suite struct LaunchPlannerTests {
    static let second: UInt64 = 1_000_000_000

    func done(_ job: UnitJob) -> UnitJobResult { UnitJobResult(job: job, outcome: .done) }

    @Test func aStartAndAStopThatMeetBeforeTheStartWasSentCancelOut() {
        var planner = LaunchPlanner()
        planner.start("u@1", unit: "accmon-x@1.service", group: "g")
        planner.stop("u@1", now: 0)
        #expect(planner.dueJobs(now: 0).isEmpty)
        #expect(planner.slots.isEmpty)
    }

    @Test func aStopWaitsForTheStartInFlightThenGoes() {
        var planner = LaunchPlanner()
        planner.start("u@1", unit: "accmon-x@1.service")
        let start = planner.dueJobs(now: 0)
        #expect(start.map(\.action) == [.start])
        planner.stop("u@1", now: 1)
        #expect(planner.dueJobs(now: 1).isEmpty, "one job per unit at a time")
        #expect(planner.finished(done(start[0]), now: 2) == .succeeded)
        let stop = planner.dueJobs(now: 2)
        #expect(stop.map(\.action) == [.stop])
        #expect(planner.finished(done(stop[0]), now: 3) == .succeeded)
        #expect(planner.slots.isEmpty)
        #expect(planner.pendingJobs == 0)
    }

    @Test func aFailedStartIsRetriedWithBackoffThenGivenUp() {
        var planner = LaunchPlanner()
        planner.start("u@1", unit: "accmon-x@1.service")
        var now: UInt64 = 0
        var delays: [UInt64] = []
        while true {
            let jobs = planner.dueJobs(now: now)
            #expect(jobs.count == 1)
            guard let job = jobs.first else { return }
            let finish = planner.finished(UnitJobResult(job: job, outcome: .failed("job failed")), now: now)
            guard case .willRetry(let after) = finish else {
                #expect(finish == .gaveUp)
                break
            }
            delays.append(after)
            #expect(planner.dueJobs(now: now + after - 1).isEmpty, "not before the backoff")
            now += after
        }
        #expect(delays == [1, 2, 4].map { $0 * Self.second })
        #expect(planner.slots.isEmpty)
        #expect(planner.dueJobs(now: now + 100 * Self.second).isEmpty)
    }

    @Test func aRelaunchThatFailsIsNotRetriedByThePlanner() {
        var planner = LaunchPlanner()
        planner.start("r", unit: "accmon-app@1000.service", runsAs: 1000, reassert: true, oneShot: true)
        let job = planner.dueJobs(now: 0)[0]
        #expect(planner.finished(UnitJobResult(job: job, outcome: .failed("start job failed")), now: 0) == .gaveUp)
        #expect(planner.slots.isEmpty)
        #expect(planner.dueJobs(now: 100 * Self.second).isEmpty, "the relaunch limiter decides on another try")
    }

    @Test func aRefusedStartIsNotRetried() {
        var planner = LaunchPlanner()
        planner.start("r", unit: "accmon-app@1000.service", runsAs: 1000, oneShot: true)
        let job = planner.dueJobs(now: 0)[0]
        #expect(job.runsAs == 1000)
        #expect(planner.finished(UnitJobResult(job: job, outcome: .refused("runs as root")), now: 0) == .gaveUp)
        #expect(planner.slots.isEmpty)
    }

    @Test func jobsInFlightAreCappedAndTheRestGoInOrder() {
        var planner = LaunchPlanner(settings: .init(maximumPendingJobs: 4))
        for index in 1...10 { planner.start("u@\(index)", unit: "accmon-x@\(index).service") }
        let first = planner.dueJobs(now: 0)
        #expect(first.map(\.slot) == ["u@1", "u@2", "u@3", "u@4"])
        #expect(planner.dueJobs(now: 0).isEmpty)
        _ = planner.finished(done(first[1]), now: 0)
        #expect(planner.dueJobs(now: 0).map(\.slot) == ["u@5"])
    }

    @Test func aKeptUnitIsReassertedWithTheUnitItHasRunning() {
        var planner = LaunchPlanner()
        planner.start("keep", unit: "accmon-k@1.service", group: "g", reassert: true)
        let first = planner.dueJobs(now: 0)
        _ = planner.finished(done(first[0]), now: 0)
        #expect(planner.dueJobs(now: 0).isEmpty, "started: nothing more")
        planner.connectionEnded("keep", now: 10 * Self.second)
        planner.start(
            "keep", unit: "accmon-k@2.service", group: "g", unlessActive: "accmon-k@1.service", reassert: true)
        let second = planner.dueJobs(now: 11 * Self.second)
        #expect(second.map(\.unit) == ["accmon-k@2.service"])
        #expect(second.first?.unlessActive == "accmon-k@1.service")
        let outcome = UnitJobResult(job: second[0], outcome: .alreadyActive("accmon-k@1.service"))
        #expect(planner.finished(outcome, now: 11 * Self.second) == .succeeded)
        #expect(planner.slots["keep"]?.told == .started)
    }

    /// 100 plug cycles in 10 s, jobs answered at once: a handful of jobs, and the last state once the hold ends.
    @Test func aFlappingAccessorySendsAHandfulOfJobsAndEndsInItsLastState() {
        var planner = LaunchPlanner()
        var active: Set<String> = []
        var jobs: [UnitJob] = []
        func step(_ now: UInt64) {
            for job in planner.dueJobs(now: now) {
                jobs.append(job)
                if job.action == .start { active.insert(job.unit) } else { active.remove(job.unit) }
                _ = planner.finished(done(job), now: now)
            }
        }
        for cycle in 0..<100 {
            let plugged = UInt64(cycle) * Self.second / 10
            let unit = "accmon-storm@\(cycle + 1).service"
            planner.start(unit, unit: unit, group: "storm")
            step(plugged)
            if cycle < 99 {
                planner.stop(unit, now: plugged + Self.second / 20)
                step(plugged + Self.second / 20)
            }
        }
        #expect(jobs.filter { $0.action == .start }.count <= 6, "starts: \(jobs.map(\.unit))")
        #expect(active.count <= 1)
        var now = 10 * Self.second
        while let wait = planner.nanosecondsUntilDue(now: now) {
            now += max(wait, 1)
            step(now)
        }
        #expect(active == ["accmon-storm@100.service"], "the last connection's unit, and only it")
        #expect(now <= 20 * Self.second)
    }
}
