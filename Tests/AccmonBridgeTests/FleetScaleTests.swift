import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

/// A host as `accmon list --broker --json` and the first line of `accmon watch --broker --json` show it.
private struct ListedHost: Decodable {
    var host: String
    var state: String
    var status: HostStatus?
    var accessories: [Accessory]
}

/// How listed hosts differ from `truth` (host → connection → accessory); empty when they agree.
private func differences(_ hosts: [ListedHost], _ truth: [String: [UInt64: Accessory]]) -> [String] {
    var problems: [String] = []
    let listed = Dictionary(hosts.map { ($0.host, $0) }) { first, _ in first }
    for (name, accessories) in truth.sorted(by: { $0.key < $1.key }) {
        guard let host = listed[name] else {
            problems.append("\(name): not listed")
            continue
        }
        let shown = Dictionary(host.accessories.map { ($0.connectionID.rawValue, $0) }) { first, _ in first }
        if shown != accessories {
            problems.append("\(name): \(shown.count) accessories listed, \(accessories.count) published")
        }
        if host.status?.retained != nil { problems.append("\(name): the output shows the status's counts") }
    }
    problems += listed.keys.filter { truth[$0] == nil }.sorted().map { "\($0): listed, not published" }
    return problems
}

private func listJSON(
    _ broker: Mosquitto, _ options: [String]
) async throws -> (hosts: [ListedHost], result: CommandResult) {
    let result = try await run(
        try Binaries.accmon, ["list", "--broker", broker.url, "--json"] + options, in: broker.directory,
        timeout: .seconds(120))
    struct Output: Decodable { var hosts: [ListedHost] }
    let output = try? JSONDecoder().decode(Output.self, from: Data(result.stdout.utf8))  // try?: nil is checked
    return (output?.hosts ?? [], result)
}

/// The number of messages one subscription to `filter` delivers to a subscriber that stops reading for 2 s (its
/// output pipe full), as the broker's queue limit lets through.
private func slowSubscriberCount(_ broker: Mosquitto, filter: String) async throws -> Int {
    let result = try await run(
        URL(fileURLWithPath: "/bin/sh"),
        [
            "-c",
            "/usr/bin/mosquitto_sub -p \(broker.port) -V 5 -t '\(filter)' --retained-only -W 4 | (sleep 2; wc -l)",
        ], in: broker.directory, timeout: .seconds(30))
    return Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
}

extension BridgeProcessTests {
    /// Fleets of a few hundred synthetic hosts on a mosquitto that queues 50 messages per client
    /// (`max_queued_messages 50`), where one subscription to the fleet's topics loses messages: the fleet view reads
    /// them in windows the broker delivers whole (docs/MQTT.md §5).
    @Suite struct FleetScale {
        static func smallQueueBroker() async throws -> Mosquitto {
            try await Mosquitto.start(Mosquitto.Options(settings: ["max_queued_messages 50"]))
        }

        /// A broker that queues 100 messages a client, 400 synthetic hosts of 3 accessories retained on it, and
        /// `accmon watch --broker --json --broker-queue 100` once its first line (the fleet) is out.
        static func watcherOfABigFleet() async throws -> (Mosquitto, SyntheticFleet, ChildProcess) {
            let broker = try await Mosquitto.start(Mosquitto.Options(settings: ["max_queued_messages 100"]))
            let fleet = SyntheticFleet(hosts: 400, accessories: 3)
            try await publishRetained(fleet.messages, to: broker)
            let watch = try ChildProcess(
                try Binaries.accmon, ["watch", "--broker", broker.url, "--json", "--broker-queue", "100"],
                name: "watch", directory: broker.directory)
            #expect(await waitFor("\n", timeout: .seconds(30)) { watch.stdout }, "\(watch.stderr)")
            return (broker, fleet, watch)
        }

        @Test func everyAccessoryOfAFleetBiggerThanTheBrokersQueueIsListed() async throws {
            let broker = try await Self.smallQueueBroker()
            let fleet = SyntheticFleet(hosts: 300, accessories: 40)
            try await publishRetained(fleet.messages, to: broker)
            let plain = try await slowSubscriberCount(broker, filter: "accmon/+/accessories/+/+")
            #expect(plain < 12_000, "one subscription read slowly should lose messages: \(plain) of 12,000 arrived")
            #expect(broker.log.contains("Outgoing messages are being dropped"), "\(broker.log)")

            let (hosts, listed) = try await listJSON(broker, ["--broker-queue", "50"])
            #expect(listed.termination == .exited(0), "\(listed.stderr)")
            let problems = differences(hosts, fleet.truth)
            #expect(problems.isEmpty, "\(problems.prefix(10))")

            let one = try await listJSON(broker, ["--broker-queue", "50", "--host", "lab-00042"])
            #expect(one.hosts.map(\.host) == ["lab-00042"])
            #expect(differences(one.hosts, fleet.truth.filter { $0.key == "lab-00042" }).isEmpty)
            let some = try await listJSON(broker, ["--broker-queue", "50", "--host", "lab-0010?"])
            #expect(some.result.termination == .exited(0), "\(some.result.stderr)")
            #expect(differences(some.hosts, fleet.truth.filter { $0.key.hasPrefix("lab-0010") }).isEmpty)

            // The dashboard's reader: the first line of `accmon watch --broker --json` is the whole fleet.
            let watch = try ChildProcess(
                try Binaries.accmon, ["watch", "--broker", broker.url, "--json", "--broker-queue", "50"],
                name: "watch", directory: broker.directory)
            defer { watch.kill() }
            #expect(await waitFor("\n", timeout: .seconds(60)) { watch.stdout }, "\(watch.stderr)")
            struct FleetLine: Decodable { var type: String; var hosts: [ListedHost] }
            let first = try JSONDecoder().decode(
                FleetLine.self, from: Data(watch.stdout.prefix { $0 != "\n" }.utf8))
            #expect(first.type == "fleet")
            #expect(differences(first.hosts, fleet.truth).isEmpty)
        }

        /// Hosts whose bridge publishes no count (older than the counts): read by estimates, in windows that cannot
        /// lose a message, every accessory listed.
        @Test func hostsOfOlderBridgesAreReadWhole() async throws {
            let broker = try await Mosquitto.start(Mosquitto.Options(settings: ["max_queued_messages 100"]))
            let fleet = SyntheticFleet(hosts: 60, accessories: 30, legacyEvery: 3)
            try await publishRetained(fleet.messages, to: broker)
            let (hosts, listed) = try await listJSON(broker, ["--broker-queue", "100"])
            #expect(listed.termination == .exited(0), "\(listed.stderr)")
            let problems = differences(hosts, fleet.truth)
            #expect(problems.isEmpty, "\(problems.prefix(10))")
        }

        /// More hosts than one read of the statuses delivers, some of them without a host index entry (older
        /// bridges): those may be missing, and the reader says so and exits 1, never silently.
        @Test func hostsThatMayBeMissingAreNeverSilentlyMissing() async throws {
            let broker = try await Self.smallQueueBroker()
            let fleet = SyntheticFleet(hosts: 300, accessories: 2, legacyEvery: 10)
            try await publishRetained(fleet.messages, to: broker)
            let (hosts, listed) = try await listJSON(broker, ["--broker-queue", "50"])
            #expect(listed.termination == .exited(1), "\(listed)")
            #expect(listed.stderr.contains("publish no host index entry"), "\(listed.stderr)")
            let indexed = fleet.truth.filter { !fleet.isLegacy(Int($0.key.dropFirst(4))!) }
            let shown = hosts.filter { indexed[$0.host] != nil }
            #expect(differences(shown, indexed).isEmpty, "every host of the index is listed whole")
        }

        /// A watcher whose changes the broker drops (a burst of 24,000 changes over 400 hosts, through a queue of
        /// 100): the statuses, which count the hosts' topics, tell; so does the end marker kept going after changes
        /// (when a status itself was dropped). The watcher reads those hosts again and shows the truth.
        @Test func aWatcherWhoseChangesTheBrokerDropsReadsTheHostsAgain() async throws {
            let (broker, fleet, watch) = try await FleetScale.watcherOfABigFleet()
            defer { watch.kill() }

            var burst: [(topic: String, payload: [UInt8])] = []
            var truth = fleet.truth
            for host in 0..<fleet.hosts {
                burst += (3..<63).map { SyntheticFleet.accessoryMessage(fleet.topics, host: host, $0) }
                burst.append((SyntheticFleet.accessoryMessage(fleet.topics, host: host, 0).topic, []))
                burst.append(
                    (fleet.topics.status(host: SyntheticFleet.name(host)), fleet.status(host, accessories: 62).payload))
                truth[SyntheticFleet.name(host)] = Dictionary(
                    uniqueKeysWithValues: (1..<63).map { (UInt64($0 + 1), SyntheticFleet.accessory(host: host, $0)) })
            }
            try await publishRetained(burst, to: broker)
            var last: [String] = []
            let converged = await eventuallyHolds(timeout: .seconds(60)) {
                last = differences(watchedView(watch.stdout), truth)
                return last.isEmpty
            }
            let dropped = broker.log.contains("Outgoing messages are being dropped for client accmon-cli")
            #expect(converged, "\(last.count) hosts differ, such as \(last.prefix(3)); dropped: \(dropped)")
            print("fleet scale: the broker dropped changes for the watcher: \(dropped)")
        }
    }
}

/// What a watcher shows after the lines `accmon watch --broker --json` printed: the fleet line, then each change.
private func watchedView(_ output: String) -> [ListedHost] {
    struct Line: Decodable {
        var type: String
        var hosts: [ListedHost]?
        var host: String?
        var accessory: Accessory?
    }
    var hosts: [String: ListedHost] = [:]
    for text in output.split(separator: "\n") {
        // try?: the last line may be partial.
        guard let line = try? JSONDecoder().decode(Line.self, from: Data(text.utf8)) else { continue }
        switch line.type {
        case "fleet": hosts = Dictionary(uniqueKeysWithValues: (line.hosts ?? []).map { ($0.host, $0) })
        case "connect":
            guard let name = line.host, let accessory = line.accessory else { continue }
            hosts[name, default: ListedHost(host: name, state: "unknown", accessories: [])].accessories.append(
                accessory)
        case "disconnect":
            guard let name = line.host, let accessory = line.accessory else { continue }
            hosts[name]?.accessories.removeAll { $0.connectionID == accessory.connectionID }
        default: continue
        }
    }
    return Array(hosts.values)
}
