import AccmonClient
import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

extension BridgeProcessTests {
    @Suite struct Fleet {
        /// Many hosts (one accmond and one bridge each) plugging and unplugging at random through one mosquitto: the
        /// fleet view equals the union of the hosts' truths, every host is online; then some bridges stop and show
        /// offline. `make test` runs 10 hosts of up to 20 accessories; `make soak` 50 of 100
        /// (`ACCMON_FLEET_HOSTS`, `ACCMON_FLEET_ACCESSORIES`, `ACCMON_FLEET_STOPPED`).
        @Test(arguments: BrokerKind.allCases) func aFleetThroughOneBrokerShowsEveryHostsTruth(
            kind: BrokerKind
        ) async throws {
            let environment = ProcessInfo.processInfo.environment
            let hostCount = environment["ACCMON_FLEET_HOSTS"].flatMap { Int($0) } ?? 10
            let accessories = environment["ACCMON_FLEET_ACCESSORIES"].flatMap { Int($0) } ?? 20
            let stoppedCount = environment["ACCMON_FLEET_STOPPED"].flatMap { Int($0) } ?? 3
            let clock = ContinuousClock()
            let started = clock.now
            let names = (0..<hostCount).map { String(format: "host-%02d", $0) }
            let broker = try await startBroker(kind, bridges: names)
            var hosts: [BridgedHost] = []
            for name in names {
                hosts.append(try await BridgedHost.start(name: name, on: broker, settings: ["keepAlive": "10"]))
            }
            let seed = SplitMix64.testSeed()
            var random = SplitMix64(seed: seed)
            let seeds = hosts.map { _ in random.next() }
            let stormStarted = clock.now
            try await withThrowingTaskGroup(of: Int.self) { group in
                for (host, seed) in zip(hosts, seeds) {
                    group.addTask {
                        try await host.storm(seed: seed, steps: accessories * 3, target: accessories)
                    }
                }
                var events = 0
                for try await plugged in group { events += plugged }
                print("fleet: \(hostCount) hosts, \(events) plugs and their unplugs in \(clock.now - stormStarted)")
            }
            let difference = try await waitForFleet(hosts, broker: broker, timeout: .seconds(60))
            #expect(difference.isEmpty, "seed \(seed): \(difference)\n\(hosts.prefix(2).map { $0.logTail() }.joined())")
            print("fleet: converged \(clock.now - stormStarted) after the storm began")

            // The CLI's fleet view says the same: every host online, the union of the truths.
            let listed = try await run(
                try Binaries.accmon, ["list", "--broker", broker.url, "--json"] + broker.cliLogin(),
                in: hosts[0].directory,
                timeout: .seconds(60))
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any])
            let listedHosts = try #require(object["hosts"] as? [[String: Any]])
            #expect(listedHosts.count == hostCount)
            var total = 0
            for host in hosts { total += try await host.truth().count }
            #expect(listedHosts.reduce(0) { $0 + (($1["accessories"] as? [Any])?.count ?? 0) } == total)
            #expect(listedHosts.allSatisfy { $0["state"] as? String == "online" })
            // Each host has its entry in the host index, by which readers list fleets bigger than one read.
            let index = try await retainedWithMosquittoSub(broker, filter: "accmon/$hosts/#")
            let topics = FleetTopics(prefix: "accmon")
            #expect(Set(index.keys) == Set(hosts.map { topics.indexEntry(host: $0.name) }), "\(index.keys.sorted())")

            // Stopping some bridges: they show offline (clean stops), the others stay online.
            let stopped = hosts.suffix(stoppedCount)
            await withTaskGroup(of: Void.self) { group in
                for host in stopped { group.addTask { _ = await host.stopBridge() } }
            }
            let offline = Set(stopped.map(\.name))
            let after = try await waitForFleet(hosts, broker: broker, offline: offline)
            #expect(after.isEmpty, "\(after)")
            print("fleet: done in \(clock.now - started)")
        }
    }
}
