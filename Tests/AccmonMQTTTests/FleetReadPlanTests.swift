import AccmonTestSupport
import Testing

@testable import AccmonMQTT

/// A host of a simulated fleet: its accessory topics, and whether its status counts them.
private struct SimulatedHost {
    var topics: Int
    var counts: Bool
}

/// Reads random fleets through the plan against a broker that behaves as mosquitto does with a queue of `limit`
/// packets: a window of fewer packets arrives whole; a bigger one may lose messages, but then at least `limit` arrive.
/// Whatever the losses, a host the plan accepts was read whole, every host that fits a window alone is accepted, and
/// no window holds more than the budget unless it holds a single host.
@Test func thePlanAcceptsOnlyWholeHostsAndReadsEveryHostThatFitsAWindow() {
    var random = SplitMix64(seed: SplitMix64.testSeed())
    for trial in 0..<120 {
        let limit = 16 + Int(random.next(below: 400))
        let hosts = (0..<Int(random.next(below: 200))).map { _ in
            SimulatedHost(
                topics: Int(random.next(below: 3)) == 0 ? Int(random.next(below: 600)) : Int(random.next(below: 40)),
                counts: random.next(below: 5) != 0)
        }
        var plan = FleetReadPlan(budget: FleetSession.budget(limit))
        for (index, host) in hosts.enumerated() {
            plan.add(level: "h\(index)", expected: host.counts ? host.topics : nil)
        }
        var outcome: [String: FleetReadPlan.Verdict] = [:]
        var windows = 0
        while !plan.isEmpty {
            windows += 1
            guard windows < 100 * (hosts.count + 1) else {
                Issue.record("trial \(trial): the plan does not end")
                break
            }
            let window = plan.nextWindow()
            let expected = window.reduce(0) { $0 + plan.size(of: $1) }
            #expect(window.count == 1 || expected <= plan.budget, "trial \(trial): \(expected) > \(plan.budget)")
            // The window's real packets: statuses, topics, the SUBACK and the end marker.
            let real = window.map { 1 + hosts[Int($0.level.dropFirst())!].topics }
            let packets = real.reduce(2, +)
            var delivered = packets
            if packets > limit, random.next(below: 2) == 0 {
                delivered = limit + Int(random.next(below: UInt64(packets - limit + 1)))
            }
            // Which messages are lost: any of the window's, statuses too.
            var lost = Set<Int>()
            let messages = real.reduce(0, +)
            while lost.count < packets - delivered, lost.count < messages {
                lost.insert(Int(random.next(below: UInt64(messages))))
            }
            var received: [String: (received: Int, counted: Int?)] = [:]
            var offset = 0
            for (host, size) in zip(window, real) {
                let simulated = hosts[Int(host.level.dropFirst())!]
                let statusArrived = !lost.contains(offset)
                let topics = (offset + 1..<offset + size).filter { !lost.contains($0) }.count
                received[host.level] = (topics, statusArrived && simulated.counts ? simulated.topics : nil)
                offset += size
            }
            let complete = delivered == packets && packets + FleetSession.uncountedPackets < limit
            for (level, verdict) in plan.finish(window, complete: complete, found: { received[$0]! }) {
                let host = hosts[Int(level.dropFirst())!]
                switch verdict {
                case .done:
                    #expect(received[level]!.received == host.topics, "trial \(trial): \(level) accepted incomplete")
                    outcome[level] = verdict
                case .givenUp:
                    outcome[level] = verdict
                case .again:
                    #expect(outcome[level] == nil)
                }
            }
        }
        for (index, host) in hosts.enumerated() {
            let verdict = outcome["h\(index)"]
            if 1 + host.topics + 2 + FleetSession.uncountedPackets < limit {
                #expect(verdict == .done, "trial \(trial): h\(index) (\(host.topics) topics, limit \(limit))")
            } else {
                #expect(verdict != nil, "trial \(trial): h\(index) neither read nor given up")
            }
        }
    }
}

@Test func theIndexPlanReadsEveryBucketWholeOrSaysWhichItCannot() {
    var random = SplitMix64(seed: SplitMix64.testSeed())
    for trial in 0..<200 {
        let limit = 16 + Int(random.next(below: 2000))
        let budget = FleetSession.budget(limit)
        let perBucket = Int(random.next(below: 60))
        let entries = (0..<HostIndex.bucketCount).map { _ in Int(random.next(below: UInt64(2 * perBucket + 1))) }
        var plan = HostIndexPlan(budget: budget, hostsAtLeast: Int(random.next(below: 3000)))
        var read = [Int](repeating: 0, count: HostIndex.bucketCount)
        var unreadable = Set<Int>()
        var windows = 0
        while !plan.isEmpty, windows < 10_000 {
            windows += 1
            let buckets = plan.nextWindow()
            let packets = buckets.reduce(2) { $0 + entries[$1] }
            let complete = packets + FleetSession.uncountedPackets < limit
            if complete { for bucket in buckets { read[bucket] += 1 } }
            if !plan.finish(buckets, complete: complete, entries: buckets.reduce(0) { $0 + entries[$1] }) {
                #expect(buckets.count == 1)
                unreadable.insert(buckets[0])
            }
        }
        #expect(plan.isEmpty, "trial \(trial): the plan does not end")
        for bucket in 0..<HostIndex.bucketCount {
            if unreadable.contains(bucket) {
                #expect(entries[bucket] + 2 + FleetSession.uncountedPackets >= limit)
            } else {
                #expect(read[bucket] == 1, "trial \(trial): bucket \(bucket) read \(read[bucket]) times")
            }
        }
    }
}

@Test func aPatternWithoutWildcardsNamesOneHost() {
    #expect(FleetSelection(pattern: nil) == .all)
    #expect(FleetSelection(pattern: "lab-1") == .named("lab-1"))
    #expect(FleetSelection(pattern: "lab-*") == .matching("lab-*"))
    #expect(FleetSelection(pattern: "lab-[12]") == .matching("lab-[12]"))
    #expect(FleetSelection.matching("lab-?").includes(hostName: "lab-1"))
    #expect(!FleetSelection.matching("lab-?").includes(hostName: "lab-12"))
    #expect(FleetSelection.named("lab/1").includes(hostLevel: "lab%2F1"))
    #expect(!FleetSelection.named("lab/1").includes(hostLevel: "lab-1"))
}
