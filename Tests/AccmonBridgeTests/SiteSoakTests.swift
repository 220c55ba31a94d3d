import AccmonClient
import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// A fleet on two site brokers bridged to a centre (docs/MQTT.md §11.1), its hosts plugging and unplugging at random,
/// claimers on every broker cycling `accmon claim --broker` on the hosts' one claimable accessory each (each command
/// checking that nobody else holds it), while the site brokers and the centre are killed with SIGKILL at random and
/// started again. At the end: never an accessory held by two, every claim ended, and the centre's view equal to every
/// host's truth with every host online (no ghost). `make test`: 4 hosts, 4 claimers, 12 s. `make soak`:
/// `ACCMON_SITE_SOAK_HOSTS` (50), `ACCMON_SITE_SOAK_CLAIMERS` (20), `ACCMON_SITE_SOAK_SECONDS` (300).
extension BridgeProcessTests {
    @Suite struct SiteSoak {
        @Test func aFleetOnTwoSitesWhoseBrokersDieAtRandomEndsRightAtTheCentre() async throws {
            let hostCount = RemoteClaimSoak.setting("ACCMON_SITE_SOAK_HOSTS", 4)
            let claimerCount = RemoteClaimSoak.setting("ACCMON_SITE_SOAK_CLAIMERS", 4)
            let seconds = RemoteClaimSoak.setting("ACCMON_SITE_SOAK_SECONDS", 12)
            let clock = ContinuousClock()
            let names = (0..<hostCount).map { String(format: "soak-%02d", $0) }
            // Claims' leases of 5 s: the claim of a claimer cut off by a broker ends soon after (its command, 0.3 s at
            // most, has ended long before).
            let sites = try await BridgedSites(
                ["site-a": Array(names.prefix(hostCount / 2)), "site-b": Array(names.dropFirst(hostCount / 2))],
                hostSettings: ["leaseSeconds": "5", "renewSeconds": "1"])
            for host in sites.hosts { _ = try await RemoteClaims.plug("SOAK", on: host) }
            for host in sites.hosts {
                #expect(await waitFor("taking requests", timeout: .seconds(60)) { host.bridgeLog })
            }
            #expect(try await sites.waitForFleet(on: sites.centre, timeout: .seconds(120)).isEmpty, "\(sites.logTails)")
            let held = sites.directory.file("held")
            try FileManager.default.createDirectory(atPath: held, withIntermediateDirectories: true)
            // Exit 99 when the accessory's file exists: someone else holds it now.
            let check =
                "set -C; f=\(held)/$ACCMON_CLAIM_HOST-$ACCMON_CLAIM_CONNECTIONS; : > \"$f\" || exit 99; "
                + "sleep 0.$(( $$ % 3 + 1 )); rm -f \"$f\""
            let brokers = [sites.centre, sites.sites["site-a"]!, sites.sites["site-b"]!]
            let brokerNames = ["centre", "site-a", "site-b"]
            let started = clock.now
            let deadline = started + .seconds(seconds)
            var random = SplitMix64(seed: SplitMix64.testSeed())
            let seeds = (0..<(hostCount + 1)).map { _ in random.next() }
            let outcome = try await withThrowingTaskGroup(of: SoakCounts.self) { group in
                // Each host changes at random: one claimable accessory stays, others come and go.
                for (host, seed) in zip(sites.hosts, seeds) {
                    group.addTask {
                        var counts = SoakCounts()
                        let connection = try await host.connect()
                        defer { connection.close() }
                        var random = SplitMix64(seed: seed)
                        var plugger = Plugger(connection)
                        while clock.now < deadline {
                            try await plugger.storm(steps: 4, target: 6, using: &random)
                            try await Task.sleep(for: .milliseconds(500 + Int(random.next(below: 1500))))
                        }
                        counts.plugs = plugger.plugged
                        return counts
                    }
                }
                // A broker killed at random every few seconds, down for a moment, started again.
                group.addTask { [seed = seeds[hostCount]] in
                    var counts = SoakCounts()
                    var random = SplitMix64(seed: seed)
                    while clock.now + .seconds(6) < deadline {
                        try await Task.sleep(for: .milliseconds(2000 + Int(random.next(below: 4000))))
                        let index = Int(random.next(below: 3))
                        brokers[index].kill9()
                        counts.kills[brokerNames[index], default: 0] += 1
                        try await Task.sleep(for: .milliseconds(200 + Int(random.next(below: 2800))))
                        try await brokers[index].restart()
                    }
                    return counts
                }
                for index in 0..<claimerCount {
                    let login = try sites.login(brokers[index % 3], as: index % 2 == 0 ? "ci" : "qa")
                    group.addTask {
                        var counts = SoakCounts()
                        while clock.now < deadline {
                            let result = try await run(
                                try Binaries.accmon,
                                ["claim"] + login
                                    + ["--serial", "SOAK", "--timeout", "20", "--reason", "soak \(index)", "--", "sh",
                                        "-c", check],
                                in: sites.directory, timeout: .seconds(90))
                            let code: Int32 = if case .exited(let status) = result.termination { status } else { -1 }
                            counts.exits[code, default: 0] += 1
                            if code == 99 { print("claimer \(index): held by two: \(result)") }
                            // A broker away: a moment before asking again.
                            if code == 69 || code == 1 { try await Task.sleep(for: .milliseconds(300)) }
                        }
                        return counts
                    }
                }
                var total = SoakCounts()
                for try await counts in group { total.add(counts) }
                return total
            }
            let stormEnded = clock.now
            let difference = try await sites.waitForFleet(on: sites.centre, timeout: .seconds(180))
            let converged = clock.now - stormEnded
            #expect(difference.isEmpty, "\(difference)\n\(sites.logTails)")
            print(
                "site soak: \(hostCount) hosts on 2 sites, \(claimerCount) claimers, \(seconds) s: kills "
                    + "\(outcome.kills.sorted { $0.key < $1.key }), claim exits "
                    + "\(outcome.exits.sorted { $0.key < $1.key }), \(outcome.plugs) plugs and about as many unplugs; "
                    + "the centre equal to every host's truth \(converged) after the end")
            #expect(outcome.exits[99] == nil, "an accessory was held by two at once: \(outcome.exits)")
            #expect((outcome.exits[0] ?? 0) > 0, "\(outcome.exits)")
            // Every claim ends: those of claimers cut off by a broker with their leases.
            for host in sites.hosts {
                #expect(
                    await eventuallyHolds(timeout: .seconds(90)) {
                        (try? await host.accmon(["claims"]))?.stdout == "no claims\n"
                    }, "\(host.name)")
            }
            let reader = try RemoteClaimClient(
                settings: sites.settings(sites.centre), topics: FleetTopics(prefix: "accmon"),
                clientID: "soak-reader-\(UInt32.random(in: 0...UInt32.max))")
            defer { reader.disconnect() }
            var left: [RemoteClaimState] = []
            #expect(
                await eventuallyHolds(timeout: .seconds(30)) {
                    left = (try? reader.readClaims()) ?? [left.first].compactMap { $0 }
                    return left.isEmpty
                }, "\(left)")
        }
    }
}

/// What a task of the site soak counted.
struct SoakCounts: Sendable {
    var exits: [Int32: Int] = [:]
    var kills: [String: Int] = [:]
    var plugs = 0

    mutating func add(_ other: SoakCounts) {
        exits.merge(other.exits, uniquingKeysWith: +)
        kills.merge(other.kills, uniquingKeysWith: +)
        plugs += other.plugs
    }
}
