import AccmonTestSupport
import Testing

@testable import AccmondKit

/// Random plug and unplug sequences of a few accessories, with jobs that systemd (a model: the set of active units)
/// answers late, in any order, sometimes failing: the planner never has more jobs in flight than its cap nor two
/// for one unit, stops only units systemd started, and once the plugging stops and systemd answers every job, the
/// active units are exactly those of the connected accessories.
@Suite struct LaunchPlannerPropertyTests {
    static let second: UInt64 = 1_000_000_000

    struct Model {
        var planner = LaunchPlanner(settings: .init(maximumPendingJobs: 3))
        var active: Set<String> = []
        var inFlight: [UnitJob] = []
        var now: UInt64 = 0
        var nextConnection: UInt64 = 1
        /// Each accessory's current connection, when connected.
        var connection: [Int: UInt64] = [:]
        /// Connections whose start the planner gave up.
        var gaveUp: Set<String> = []
        var started: Set<String> = []
        /// Units whose stop the planner gave up: they may stay active.
        var abandoned: Set<String> = []

        static let kept: Set<Int> = [2]
        func key(_ accessory: Int, _ connection: UInt64) -> String {
            Self.kept.contains(accessory) ? "keep-\(accessory)" : "accmon-a\(accessory)@\(connection).service"
        }
        func unit(_ accessory: Int, _ connection: UInt64) -> String { "accmon-a\(accessory)@\(connection).service" }

        mutating func plug(_ accessory: Int, keptUnit: String?) {
            let id = nextConnection
            nextConnection += 1
            connection[accessory] = id
            let isKept = Self.kept.contains(accessory)
            planner.start(
                key(accessory, id), unit: unit(accessory, id), group: "g\(accessory)",
                unlessActive: isKept ? keptUnit : nil, reassert: isKept)
        }

        mutating func unplug(_ accessory: Int) {
            guard let id = connection.removeValue(forKey: accessory) else { return }
            if Self.kept.contains(accessory) {
                planner.connectionEnded(key(accessory, id), now: now)
            } else {
                planner.stop(key(accessory, id), now: now)
            }
        }

        mutating func send() {
            for job in planner.dueJobs(now: now) {
                #expect(!inFlight.contains { $0.slot == job.slot }, "two jobs in flight for \(job.slot)")
                if job.action == .stop { #expect(started.contains(job.unit), "stop of \(job.unit), never started") }
                inFlight.append(job)
            }
            #expect(inFlight.count <= planner.settings.maximumPendingJobs)
            #expect(inFlight.count == planner.pendingJobs)
        }

        mutating func answer(_ index: Int, failing: Bool) {
            let job = inFlight.remove(at: index)
            var outcome = UnitJobOutcome.done
            if failing {
                outcome = .failed("job failed")
            } else if let previous = job.unlessActive, active.contains(previous) {
                outcome = .alreadyActive(previous)
            } else if job.action == .start {
                active.insert(job.unit)
                started.insert(job.unit)
            } else {
                active.remove(job.unit)
            }
            if planner.finished(UnitJobResult(job: job, outcome: outcome), now: now) == .gaveUp {
                if job.action == .start { gaveUp.insert(job.slot) } else { abandoned.insert(job.unit) }
            }
        }
    }

    @Test func randomPlugSequencesEndWithTheUnitsOfTheConnectedAccessories() {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        for _ in 0..<1_000 {
            var model = Model()
            var keptUnit: String?
            for _ in 0..<random.next(below: 200) {
                let accessory = Int(random.next(below: 4))
                switch random.next(below: 10) {
                case 0...2:
                    if model.connection[accessory] == nil {
                        if accessory == 2 { keptUnit = model.active.first { $0.hasPrefix("accmon-a2@") } }
                        model.plug(accessory, keptUnit: keptUnit)
                    }
                case 3...5: model.unplug(accessory)
                case 6: model.now += random.next(below: 3 * Self.second)
                default:
                    if !model.inFlight.isEmpty {
                        model.answer(Int(random.next(below: UInt64(model.inFlight.count))), failing: random.next(below: 8) == 0)
                    }
                }
                model.send()
            }
            // The plugging stops; systemd answers everything, and time passes until nothing waits.
            var rounds = 0
            while rounds < 1_000 {
                rounds += 1
                while !model.inFlight.isEmpty { model.answer(0, failing: false) }
                model.send()
                if model.inFlight.isEmpty {
                    guard let wait = model.planner.nanosecondsUntilDue(now: model.now) else { break }
                    model.now += max(wait, 1)
                    model.send()
                }
            }
            #expect(model.inFlight.isEmpty && model.planner.pendingJobs == 0, "seed \(seed)")
            let expected = Set(
                model.connection.filter { !Model.kept.contains($0.key) }.map { model.unit($0.key, $0.value) }
                    .filter { !model.gaveUp.contains($0) })
            let activeNotKept = model.active.filter { !$0.hasPrefix("accmon-a2@") && !model.abandoned.contains($0) }
            #expect(activeNotKept == expected, "seed \(seed) (ACCMON_TEST_SEED replays it)")
            if let id = model.connection[2], !model.gaveUp.contains(model.key(2, id)) {
                #expect(model.active.contains { $0.hasPrefix("accmon-a2@") }, "the kept accessory's unit runs, seed \(seed)")
            }
            #expect(model.planner.slots.keys.allSatisfy { $0.hasPrefix("keep-") || model.active.contains($0) })
        }
    }
}
