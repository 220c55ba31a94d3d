import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation

/// The broker's retained fleet state, read in this process with the fleet reader (`accmon list --broker`'s).
func fleetState(
    _ broker: any TestBroker, settings: BrokerSettings? = nil, prefix: String = "accmon"
) async throws -> FleetState {
    let settings = try settings ?? broker.readerSettings()
    return try await FleetReader.state(settings: settings, topics: FleetTopics(prefix: prefix)).state
}

/// How the broker's retained state differs from the hosts' truths (each host's accessories, status online unless
/// listed in `offline`, the count of accessory topics an online status carries); empty when they agree.
func differences(_ state: FleetState, _ truths: [String: [UInt64: Accessory]], offline: Set<String> = []) -> [String] {
    var problems: [String] = []
    for (name, truth) in truths.sorted(by: { $0.key < $1.key }) {
        guard let host = state.hosts[FleetTopics.encodeLevel(name)] else {
            problems.append("\(name): not on the broker")
            continue
        }
        let expectedState = offline.contains(name) ? "offline" : "online"
        if host.stateName != expectedState { problems.append("\(name): \(host.stateName), expected \(expectedState)") }
        let missing = truth.keys.filter { host.accessories[$0] == nil }.sorted()
        let ghosts = host.accessories.keys.filter { truth[$0] == nil }.sorted()
        let wrong = truth.keys.filter { host.accessories[$0] != nil && host.accessories[$0] != truth[$0] }.sorted()
        if !missing.isEmpty { problems.append("\(name): missing connections \(missing)") }
        if !ghosts.isEmpty { problems.append("\(name): ghost connections \(ghosts)") }
        if !wrong.isEmpty { problems.append("\(name): payloads differ for connections \(wrong)") }
        let counted = host.status?.retainedCount(.accessories)
        if counted == nil, expectedState == "online" { problems.append("\(name): its status counts nothing") }
        if let counted, counted != truth.count {
            problems.append("\(name): its status counts \(counted) of \(truth.count)")
        }
    }
    return problems
}

/// Waits until the broker's retained state equals the hosts' truths; returns the last differences when it does not
/// within `timeout` (empty: converged).
func waitForFleet(
    _ hosts: [BridgedHost], broker: any TestBroker, offline: Set<String> = [], settings: BrokerSettings? = nil,
    timeout: Duration = .seconds(30)
) async throws -> [String] {
    var truths: [String: [UInt64: Accessory]] = [:]
    for host in hosts { truths[host.name] = try await host.truth() }
    var last: [String] = ["not read"]
    _ = await eventually(timeout: timeout, interval: .milliseconds(100)) {
        do {
            last = differences(try await fleetState(broker, settings: settings), truths, offline: offline)
        } catch {
            last = ["read: \(error)"]
        }
        return last.isEmpty
    }
    return last
}

/// The retained messages under `filter` as mosquitto_sub prints them (topic → payload), read independently of accmon:
/// `mosquitto_sub --retained-only` exits at the first message that is not retained, which a marker publication sends.
func retainedWithMosquittoSub(_ broker: any TestBroker, filter: String = "accmon/#") async throws -> [String: String] {
    let marker = "test-marker/\(UInt64.random(in: 0...UInt64.max))"
    let sub = try ChildProcess(
        URL(fileURLWithPath: "/usr/bin/mosquitto_sub"),
        ["-p", String(broker.port)] + broker.clientLogin
            + ["-t", filter, "-t", marker, "--retained-only", "-F", "%t\t%p", "-W", "20"],
        name: "sub-\(marker.suffix(6))", directory: broker.directory)
    _ = await eventually(timeout: .seconds(20), interval: .milliseconds(100)) {
        _ = try? await run(  // try?: the marker is sent again until the reader exits
            URL(fileURLWithPath: "/usr/bin/mosquitto_pub"),
            ["-p", String(broker.port)] + broker.clientLogin + ["-t", marker, "-m", "end"],
            in: broker.directory)
        return !sub.isRunning
    }
    guard sub.termination == .exited(0) else { throw Binaries.LocateError(description: "mosquitto_sub: \(sub.stderr)") }
    var messages: [String: String] = [:]
    for line in sub.stdout.split(separator: "\n") {
        let parts = line.split(separator: "\t", maxSplits: 1, omittingEmptySubsequences: false)
        messages[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
    }
    return messages
}
