import AccmonClient
import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

extension BridgeProcessTests {
    @Suite struct EndToEnd {
        /// Against mosquitto and ejabberd (docs/MQTT.md §10): a host whose name needs percent-encoding on mosquitto
        /// (ejabberd's users, which its ACL puts in the topics, cannot hold a `/`).
        @Test(arguments: BrokerKind.allCases) func plugsBecomeRetainedStateEventsAndTheFleetView(
            kind: BrokerKind
        ) async throws {
            let name = kind == .mosquitto ? "lab/1" : "lab-1"
            let level = FleetTopics.encodeLevel(name)
            let broker = try await startBroker(kind, bridges: [name])
            let host = try await BridgedHost.start(name: name, on: broker)
            #expect(await waitFor("mqtt: synchronized") { host.bridgeLog }, "\(host.logTail())")
            let login = try broker.cliLogin()
            let events = try ChildProcess(
                URL(fileURLWithPath: "/usr/bin/mosquitto_sub"),
                ["-p", String(broker.port)] + broker.clientLogin + ["-t", "accmon/\(level)/events", "-q", "1"],
                name: "events", directory: host.directory)
            let watch = try ChildProcess(
                try Binaries.accmon, ["watch", "--broker", broker.url, "--json"] + login, name: "watch",
                directory: host.directory)
            #expect(await waitFor(#""type":"fleet""#) { watch.stdout })
            try await Task.sleep(for: .milliseconds(200))  // mosquitto_sub subscribed

            let connection = try await host.connect()
            defer { connection.close() }
            var random = SplitMix64(seed: SplitMix64.testSeed())
            var plugger = Plugger(connection)
            for _ in 0..<6 { try await plugger.plug(using: &random) }
            try await plugger.unplug(using: &random)
            try await plugger.unplug(using: &random)
            let difference = try await waitForFleet([host], broker: broker)
            #expect(difference.isEmpty, "\(difference)\n\(host.logTail())")

            // The retained topics, read by mosquitto_sub: the status, and one topic per connection holding the
            // accessory object.
            let truth = try await host.truth()
            let retained = try await retainedWithMosquittoSub(broker)
            let status = try #require(retained["accmon/\(level)/status"])
            #expect(HostStatus.decode(Array(status.utf8))?.state == .online)
            #expect(HostStatus.decode(Array(status.utf8))?.host == name)
            let accessoryTopics = retained.keys.filter { $0.hasPrefix("accmon/\(level)/accessories/") }
            #expect(
                Set(accessoryTopics)
                    == Set(
                        truth.values.map {
                            FleetTopics(prefix: "accmon").accessory(
                                host: name, accessoryID: $0.accessoryID, connectionID: $0.connectionID.rawValue)
                        }))
            for accessory in truth.values {
                let topic = FleetTopics(prefix: "accmon").accessory(
                    host: name, accessoryID: accessory.accessoryID, connectionID: accessory.connectionID.rawValue)
                let payload = try #require(retained[topic])
                #expect(try JSONDecoder().decode(Accessory.self, from: Data(payload.utf8)) == accessory)
            }

            // The events topic: each event line once, in order.
            #expect(await eventuallyHolds { events.stdout.split(separator: "\n").count >= 8 })
            let lines = events.stdout.split(separator: "\n").map(String.init)
            let sequences = lines.compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
            .compactMap { ($0["seq"] as? NSNumber)?.uint64Value }
            #expect(sequences == Array(1...8), "\(lines)")

            // accmon watch --broker: the fleet line, then connect and disconnect lines that end at the truth.
            #expect(await eventuallyHolds { watchView(watch.stdout)[name] == Set(truth.keys) }, "\(watch.stdout)")

            // accmon list --broker, as a table and as JSON.
            let table = try await run(try Binaries.accmon, ["list", "--broker", broker.url] + login, in: host.directory)
            #expect(table.termination == .exited(0), "\(table)")
            let rows = table.stdout.split(separator: "\n")
            #expect(rows.first?.hasPrefix("HOST   STATE   CONN") == true, "\(table.stdout)")
            #expect(
                rows.dropFirst().count == truth.count
                    && rows.dropFirst().allSatisfy { $0.hasPrefix("\(name)  online") })
            let listed = try await run(
                try Binaries.accmon, ["list", "--broker", broker.url, "--json", "--host", "lab*"] + login,
                in: host.directory)
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any])
            let hosts = try #require(object["hosts"] as? [[String: Any]])
            #expect(
                hosts.count == 1 && hosts[0]["host"] as? String == name && hosts[0]["state"] as? String == "online")
            #expect((hosts[0]["accessories"] as? [Any])?.count == truth.count)
            let none = try await run(
                try Binaries.accmon, ["list", "--broker", broker.url, "--host", "other*"] + login, in: host.directory)
            #expect(none.stdout.split(separator: "\n").count == 1, "\(none.stdout)")

            // A clean stop: offline with its reason; the accessories stay as last published.
            #expect(await host.stopBridge() == .exited(0), "\(host.logTail())")
            let after = try await fleetState(broker)
            #expect(after.hosts[level]?.status?.state == .offline)
            #expect(after.hosts[level]?.status?.reason == "stopped")
            #expect(after.hosts[level]?.accessories.count == truth.count)
            #expect(await eventuallyHolds { watch.stdout.contains(#""reason":"stopped""#) }, "\(watch.stdout)")
        }

        @Test(arguments: BrokerKind.allCases) func aKilledBridgeIsShownOfflineByItsWillAndARestartLeavesNoGhost(
            kind: BrokerKind
        ) async throws {
            let broker = try await startBroker(kind, bridges: ["lab-2"])
            let host = try await BridgedHost.start(name: "lab-2", on: broker)
            let connection = try await host.connect()
            defer { connection.close() }
            var random = SplitMix64(seed: SplitMix64.testSeed())
            var plugger = Plugger(connection)
            try await plugger.storm(steps: 20, target: 10, using: &random)
            #expect(try await waitForFleet([host], broker: broker).isEmpty)
            let before = try await fleetState(broker).hosts["lab-2"]?.status

            host.killBridge()
            #expect(
                await eventuallyHolds {
                    (try? await fleetState(broker))?.hosts["lab-2"]?.status?.reason == "connection-lost"
                })  // try?: polled again
            let will = try await fleetState(broker).hosts["lab-2"]?.status
            #expect(will?.state == .offline && will?.runID == before?.runID)
            let status = try await host.accmon(["status"])
            #expect(status.stdout.contains("restore:accmon-mqtt"), "\(status.stdout)")
            #expect(status.stdout.contains("preserved"), "\(status.stdout)")

            // While it is down the host changes; the restarted bridge publishes the net change and removes the rest.
            try await plugger.storm(steps: 30, target: 10, using: &random)
            try host.startBridge()
            let difference = try await waitForFleet([host], broker: broker)
            #expect(difference.isEmpty, "\(difference)\n\(host.logTail())")
            #expect(host.bridgeLog.contains("accmond: session 'accmon-mqtt' restored"), "\(host.logTail())")
            let online = try await fleetState(broker).hosts["lab-2"]?.status
            #expect(
                online?.state == .online && online?.runID != before?.runID && online?.machineID == before?.machineID)
        }
    }
}

/// The accessories an `accmon watch --broker --json` transcript ends with, per host (connection ids).
func watchView(_ output: String) -> [String: Set<UInt64>] {
    var view: [String: Set<UInt64>] = [:]
    for line in output.split(separator: "\n") {
        // try?: a line still being written is not JSON yet.
        guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
            let type = object["type"] as? String
        else { continue }
        func connection(_ accessory: Any?) -> UInt64? {
            ((accessory as? [String: Any])?["connectionID"] as? NSNumber)?.uint64Value
        }
        switch type {
        case "fleet":
            view = [:]
            for host in object["hosts"] as? [[String: Any]] ?? [] {
                let name = host["host"] as? String ?? "?"
                view[name] = Set((host["accessories"] as? [Any] ?? []).compactMap(connection))
            }
        case "connect":
            if let id = connection(object["accessory"]) {
                view[object["host"] as? String ?? "?", default: []].insert(id)
            }
        case "disconnect":
            if let id = connection(object["accessory"]) { view[object["host"] as? String ?? "?"]?.remove(id) }
        default: break
        }
    }
    return view
}
