import AccmonClient
import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

extension BridgeProcessTests {
    @Suite struct BrokerFaults {
        /// mosquitto killed with SIGKILL in the middle of plug storms on two hosts, and started again: without
        /// persistence it comes back empty (the bridges publish everything again); with it, it comes back with what it
        /// saved up to a second before (the bridges remove what is stale). Either way the retained state ends equal to
        /// each host's truth.
        /// ejabberd keeps its retained messages in its database, on disk: it always comes back with them.
        @Test(arguments: [
            BrokerRun(.mosquitto, persistence: false), BrokerRun(.mosquitto, persistence: true),
            BrokerRun(.ejabberd, persistence: true),
        ]) func brokerKilledMidStormAndRestarted(_ run: BrokerRun) async throws {
            let broker = try await startBroker(
                run.kind, bridges: ["rack-a", "rack-b"], mosquitto: Mosquitto.Options(persistence: run.persistence))
            let hosts = [
                try await BridgedHost.start(name: "rack-a", on: broker),
                try await BridgedHost.start(name: "rack-b", on: broker),
            ]
            for host in hosts { #expect(await waitFor("mqtt: synchronized") { host.bridgeLog }) }
            let watch = try ChildProcess(
                try Binaries.accmon, ["watch", "--broker", broker.url, "--json"] + broker.cliLogin(), name: "watch",
                directory: broker.directory)
            #expect(await waitFor(#""type":"fleet""#) { watch.stdout })
            var random = SplitMix64(seed: SplitMix64.testSeed())
            let seeds = (0..<2).map { _ in random.next() }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (host, seed) in zip(hosts, seeds) {
                    group.addTask {
                        _ = try await host.storm(
                            seed: seed, rounds: 10, steps: 15, target: 20, pause: .milliseconds(20))
                    }
                }
                group.addTask {
                    try await Task.sleep(for: .milliseconds(1200 + Int.random(in: 0...300)))  // persistence saved once
                    broker.kill9()
                    try await Task.sleep(for: .milliseconds(Int.random(in: 50...400)))
                    try await broker.restart()
                }
                try await group.waitForAll()
            }
            let difference = try await waitForFleet(hosts, broker: broker)
            var statuses = ""
            for host in hosts { statuses += try await host.accmon(["status"]).stdout }
            #expect(
                difference.isEmpty, "\(difference)\n\(statuses)\n\(hosts.map { $0.logTail() }.joined(separator: "\n"))")
            for host in hosts {
                #expect(
                    host.bridgeLog.contains("mqtt: mqtt://127.0.0.1:\(broker.port): connection lost"),
                    "\(host.logTail())")
            }
            // accmon watch --broker followed through the outage: it reconnected and ends with the truth.
            var truths: [String: Set<UInt64>] = [:]
            for host in hosts { truths[host.name] = Set(try await host.truth().keys) }
            #expect(await eventuallyHolds { watchView(watch.stdout) == truths }, "\(watch.stderr)")
            #expect(watch.stderr.contains("reconnecting in"), "\(watch.stderr)")
            // The independent reader agrees: as many accessory topics as connections.
            let retained = try await retainedWithMosquittoSub(broker)
            var expected = 0
            for host in hosts { expected += try await host.truth().count }
            #expect(retained.keys.filter { $0.contains("/accessories/") }.count == expected)
        }

        /// While the broker is down the bridge says so in its log, retries with backoff, and has accmond hold the
        /// events (its session shows as suspended); nothing is lost when the broker is back.
        @Test func anUnreachableBrokerSuspendsTheSessionAndLosesNothing() async throws {
            let broker = try await Mosquitto.start()
            let host = try await BridgedHost.start(name: "bench-1", broker: broker.url)
            let connection = try await host.connect()
            defer { connection.close() }
            var random = SplitMix64(seed: SplitMix64.testSeed())
            var plugger = Plugger(connection)
            try await plugger.storm(steps: 20, target: 10, using: &random)
            #expect(try await waitForFleet([host], broker: broker).isEmpty)

            broker.kill9()
            try await plugger.storm(steps: 200, target: 40, using: &random)
            #expect(
                await waitFor("Connection refused; reconnecting in 0.4 s (attempt 3)") { host.bridgeLog },
                "\(host.logTail())")
            let status = try await host.accmon(["status"])
            let line = status.stdout.split(separator: "\n").first { $0.contains("accmon-mqtt") }.map(String.init) ?? ""
            #expect(line.contains("suspended (requested)"), "\(status.stdout)")
            #expect(host.bridgeLog.contains("accmond keeps the events meanwhile"))
            let delays = host.bridgeLog.split(separator: "\n").compactMap { line -> Double? in
                guard let range = line.range(of: "reconnecting in ") else { return nil }
                return Double(line[range.upperBound...].prefix { $0 != " " })
            }
            #expect(delays.count >= 3 && zip(delays, delays.dropFirst()).allSatisfy { $0 < $1 }, "backoff: \(delays)")

            try await broker.restart()
            let difference = try await waitForFleet([host], broker: broker)
            #expect(difference.isEmpty, "\(difference)\n\(host.logTail())")
            let live = try await host.accmon(["status"])
            #expect(
                live.stdout.split(separator: "\n").first { $0.contains("accmon-mqtt") }?.contains("live") == true,
                "\(live.stdout)")
        }

        @Test func aBridgeStartedWithoutABrokerSaysSoAndHoldsTheEvents() async throws {
            let port = try freeTCPPort()
            let host = try await BridgedHost.start(name: "alone", broker: "mqtt://127.0.0.1:\(port)")
            #expect(
                await waitFor(
                    "mqtt: mqtt://127.0.0.1:\(port): connect: Connection refused; reconnecting in 0.1 s (attempt 1)"
                ) {
                    host.bridgeLog
                }, "\(host.logTail())")
            let status = try await host.accmon(["status"])
            #expect(status.stdout.contains("suspended (requested)"), "\(status.stdout)")
        }

        /// Someone else edits the host's retained topics: a ghost connection and a changed payload. The bridge sees it
        /// (its subscription takes only others' messages) and overwrites them with the truth.
        @Test(arguments: BrokerKind.allCases) func retainedTopicsEditedBySomeoneElseAreOverwritten(
            kind: BrokerKind
        ) async throws {
            let broker = try await startBroker(kind, bridges: ["lab-3"])
            let host = try await BridgedHost.start(name: "lab-3", on: broker)
            let connection = try await host.connect()
            defer { connection.close() }
            let id = try await connection.simulateConnect(Accessory(kind: .serial, name: "real", serialNumber: "R1"))
            #expect(try await waitForFleet([host], broker: broker).isEmpty)
            let real = try #require(try await host.truth()[id.rawValue])
            let topic = FleetTopics(prefix: "accmon").accessory(
                host: "lab-3", accessoryID: real.accessoryID, connectionID: id.rawValue)
            for (target, payload) in [
                ("accmon/lab-3/accessories/ghost/999", #"{"kind":"usb"}"#), (topic, #"{"kind":"usb","name":"fake"}"#),
            ] {
                let edit = try await run(
                    URL(fileURLWithPath: "/usr/bin/mosquitto_pub"),
                    ["-p", String(broker.port)] + broker.clientLogin + ["-q", "1", "-r", "-t", target, "-m", payload],
                    in: broker.directory)
                #expect(edit.termination == .exited(0))
            }
            let difference = try await waitForFleet([host], broker: broker)
            #expect(difference.isEmpty, "\(difference)\n\(host.logTail())")
            #expect(host.bridgeLog.contains("another client changed"), "\(host.logTail())")
            let retained = try await retainedWithMosquittoSub(broker)
            #expect(retained["accmon/lab-3/accessories/ghost/999"] == nil)
        }

        /// The broker drops the bridge's connection in the middle of publications (another client takes over its
        /// client id, as a broker does for a duplicate id): the bridge reconnects and nothing is lost.
        @Test func theBrokerDisconnectingTheBridgeMidPublicationLosesNothing() async throws {
            let broker = try await Mosquitto.start()
            let host = try await BridgedHost.start(name: "lab-4", broker: broker.url, machineID: "0123456789abcdef")
            var random = SplitMix64(seed: SplitMix64.testSeed())
            let seed = random.next()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    _ = try await host.storm(seed: seed, rounds: 10, steps: 20, target: 30, pause: .milliseconds(30))
                }
                group.addTask {
                    for _ in 0..<3 {
                        try await Task.sleep(for: .milliseconds(150))
                        let takeover = try await run(
                            URL(fileURLWithPath: "/usr/bin/mosquitto_pub"),
                            [
                                "-p", String(broker.port), "-V", "5", "-i", "accmon-mqtt-lab-4-01234567", "-t", "x",
                                "-m", "y",
                            ],
                            in: broker.directory)
                        #expect(takeover.termination == .exited(0), "\(takeover)")
                    }
                }
                try await group.waitForAll()
            }
            let difference = try await waitForFleet([host], broker: broker)
            #expect(difference.isEmpty, "\(difference)\n\(host.logTail())")
            // Each takeover ends the bridge's connection; publications cut off are published again, never skipped.
            #expect(host.bridgeLog.components(separatedBy: "connection lost").count > 3, "\(host.logTail())")
            #expect(!host.bridgeLog.contains("skipped"), "\(host.logTail())")
        }

        /// A will of an earlier run (or any offline status) arriving while the bridge is online does not leave the
        /// host offline: the bridge, which watches its own status topic, publishes online again.
        @Test func aLateWillOfAnEarlierRunDoesNotMarkALiveHostOffline() async throws {
            let broker = try await Mosquitto.start()
            let host = try await BridgedHost.start(name: "lab-6", broker: broker.url, machineID: "feedfacefeedface")
            #expect(await waitFor("mqtt: synchronized") { host.bridgeLog })
            let live = try #require(try await fleetState(broker).hosts["lab-6"]?.status)
            let lateWill = HostStatus(
                state: .offline, host: "lab-6", machineID: "feedfacefeedface", runID: "an-earlier-run",
                since: live.since - 100, bridge: live.bridge, reason: "connection-lost")
            let published = try await run(
                URL(fileURLWithPath: "/usr/bin/mosquitto_pub"),
                [
                    "-p", String(broker.port), "-r", "-q", "1", "-t", "accmon/lab-6/status", "-m",
                    String(decoding: lateWill.payload, as: UTF8.self),
                ], in: broker.directory)
            #expect(published.termination == .exited(0))
            #expect(await waitFor("publishing online again") { host.bridgeLog }, "\(host.logTail())")
            // try?: polled again.
            #expect(
                await eventuallyHolds {
                    let status = (try? await fleetState(broker))?.hosts["lab-6"]?.status
                    return status?.state == .online && status?.runID == live.runID
                })
        }

        /// Two machines publishing under one host name are told apart by their machine ids; each bridge says so.
        @Test func twoMachinesUnderOneHostNameAreReported() async throws {
            let broker = try await Mosquitto.start()
            let first = try await BridgedHost.start(name: "twin", broker: broker.url, machineID: "aaaaaaaaaaaaaaaa")
            #expect(await waitFor("mqtt: synchronized") { first.bridgeLog })
            let second = try await BridgedHost.start(name: "twin", broker: broker.url, machineID: "bbbbbbbbbbbbbbbb")
            #expect(await waitFor("mqtt: synchronized") { second.bridgeLog })
            #expect(
                await waitFor("another machine (machine id bbbbbbbbbbbbbbbb) publishes as host 'twin'") {
                    first.bridgeLog
                }, "\(first.logTail())")
            let status = try #require(try await fleetState(broker).hosts["twin"]?.status)
            #expect(status.machineID == "bbbbbbbbbbbbbbbb", "the later one's status stays: no fight")
        }
    }
}

/// A broker of some kind, with or without persistence (ejabberd always keeps its retained messages on disk).
struct BrokerRun: Sendable, CustomTestStringConvertible {
    var kind: BrokerKind
    var persistence: Bool

    init(_ kind: BrokerKind, persistence: Bool) {
        self.kind = kind
        self.persistence = persistence
    }

    var testDescription: String { "\(kind.rawValue)\(persistence ? ", persistence" : "")" }
}
