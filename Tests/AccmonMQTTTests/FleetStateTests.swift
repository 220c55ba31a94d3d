import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

private let topics = FleetTopics(prefix: "accmon")

private func payload(_ accessory: Accessory) -> [UInt8] {
    // An event line, not an accessory object.
    Array(ProtocolCodec().encode(.event(AccessoryEvent(.connect, sequence: 1, accessory: accessory))))
}

private func objectPayload(_ accessory: Accessory) -> [UInt8] {
    // The accessory object as the bridge publishes it: the event line's "accessory" member.
    let line = String(
        decoding: ProtocolCodec().encode(.event(AccessoryEvent(.connect, sequence: 1, accessory: accessory))),
        as: UTF8.self)
    let start = line.index(line.startIndex, offsetBy: #"{"accessory":"#.count)
    let end = line.range(of: #","seq":"#)!.lowerBound
    return Array(line[start..<end].utf8)
}

/// The retained claim payload the bridge publishes for one connection.
private func claimPayload(_ host: String, _ accessory: Accessory, _ claim: FleetClaim) -> [UInt8] {
    let summary = ClaimSummary(
        claimID: claim.claimID, holder: claim.holder, since: claim.since, reason: claim.reason, waiting: claim.waiting,
        connections: [accessory.connectionID], accessoryIDs: [accessory.accessoryID])
    let state = RemoteClaimState(
        host: host, accessoryID: accessory.accessoryID, connectionID: accessory.connectionID.rawValue, summary: summary)
    return Array(try! JSONEncoder().encode(state))
}

private let claims = [
    FleetClaim(claimID: "c-1", holder: Party(user: "ci", remote: true), since: 1_796_184_996.5, reason: "", waiting: 0),
    FleetClaim(
        claimID: "c-2", holder: Party(user: "alice", uid: 1000, pid: 42, client: "flasher"), since: 1_796_184_997,
        reason: "flashing fw/2.1", waiting: 2),
]

/// `claim` on `accessory`, as a read of its claim topic makes it.
private func on(_ claim: FleetClaim, _ accessory: Accessory) -> FleetClaim {
    var claim = claim
    claim.accessoryID = accessory.accessoryID
    return claim
}

private func status(_ host: String, _ state: HostStatus.State) -> HostStatus {
    HostStatus(state: state, host: host, machineID: "m", runID: "r", since: 1, bridge: "0.1.0")
}

@Test func messagesBuildHostsWithStatusAndAccessories() {
    var state = FleetState(topics: topics)
    var changes: [FleetChange]
    let stick = Accessory(kind: .usb, connectionID: ConnectionID(7), name: "stick", vendorID: "1209", productID: "0001")
    let topic = topics.accessory(host: "lab/1", accessoryID: stick.accessoryID, connectionID: 7)
    changes = state.apply(topic: topic, payload: objectPayload(stick))
    #expect(changes == [.connected(host: "lab/1", stick)])
    changes = state.apply(topic: topic, payload: objectPayload(stick))
    #expect(changes == [], "the same payload again changes nothing")
    #expect(state.hosts["lab%2F1"]?.stateName == "unknown")
    let online = status("lab/1", .online)
    changes = state.apply(topic: topics.status(host: "lab/1"), payload: online.payload)
    #expect(changes == [.status(host: "lab/1", online)])
    #expect(state.sortedHosts.map(\.name) == ["lab/1"])
    #expect(state.hosts["lab%2F1"]?.sortedAccessories == [stick])
    changes = state.apply(topic: topic, payload: [])
    #expect(changes == [.disconnected(host: "lab/1", stick)])
    changes = state.apply(topic: topic, payload: [])
    #expect(changes == [])
    changes = state.apply(topic: topics.status(host: "lab/1"), payload: [])
    #expect(changes == [.status(host: "lab/1", nil)])
    #expect(state.unreadable == 0)
    changes = state.apply(topic: topic, payload: payload(stick))
    #expect(changes == [], "an event line is not an accessory object")
    changes = state.apply(topic: topics.status(host: "lab/1"), payload: Array("up".utf8))
    #expect(changes == [])
    #expect(state.unreadable == 2)
    changes = state.apply(topic: "accmon/lab-1/events", payload: payload(stick))
    #expect(changes == [])
}

/// What a watcher shows: each host's status and accessories.
private struct WatcherView: Equatable {
    var statuses: [String: HostStatus] = [:]
    /// Each accessory with its claim.
    var accessories: [String: Set<FleetAccessory>] = [:]

    init(_ state: FleetState) {
        for host in state.hosts.values {
            if let status = host.status { statuses[host.name] = status }
            if !host.accessories.isEmpty {
                accessories[host.name] = Set(
                    host.accessories.values.map { FleetAccessory($0, claim: host.claim(of: $0)) })
            }
        }
    }

    mutating func apply(_ changes: [FleetChange]) {
        for change in changes {
            switch change {
            case .connected(let host, let accessory, let claim):
                accessories[host, default: []].insert(FleetAccessory(accessory, claim: claim))
            case .disconnected(let host, let accessory, let claim):
                #expect(accessories[host]?.remove(FleetAccessory(accessory, claim: claim)) != nil, "shown before")
                if accessories[host]?.isEmpty == true { accessories[host] = nil }
            case .status(let host, let status, _): statuses[host] = status
            case .unconfirmed, .confirmed: break  // still shown either way
            }
        }
    }
}

@Test func changesBetweenTwoStatesTakeAWatcherFromOneToTheOther() {
    var random = SplitMix64(seed: SplitMix64.testSeed())
    let hosts = ["a", "b/c", "d"]
    let accessories = (0..<6).map {
        Accessory(kind: .usb, connectionID: ConnectionID(UInt64($0)), name: "n\($0)", serialNumber: "S\($0 % 3)")
    }
    /// A random message: a status, an accessory object or a claim, set or deleted.
    func randomMessage() -> (topic: String, payload: [UInt8]) {
        let host = hosts.randomElement(using: &random)!
        let accessory = accessories.randomElement(using: &random)!
        switch random.next(below: 4) {
        case 0:
            let value = [nil, status(host, .online), status(host, .offline)].randomElement(using: &random)!
            return (topics.status(host: host), value?.payload ?? [])
        case 1:
            let claim = [nil, claims[0], claims[1]].randomElement(using: &random)!
            return (
                topics.claim(
                    host: host, accessoryID: accessory.accessoryID, connectionID: accessory.connectionID.rawValue),
                claim.map { claimPayload(host, accessory, $0) } ?? []
            )
        default:
            return (
                topics.accessory(
                    host: host, accessoryID: accessory.accessoryID, connectionID: accessory.connectionID.rawValue),
                Bool.random(using: &random) ? objectPayload(accessory) : []
            )
        }
    }
    func randomState() -> FleetState {
        var state = FleetState(topics: topics)
        for _ in 0..<random.next(below: 20) {
            let message = randomMessage()
            _ = state.apply(topic: message.topic, payload: message.payload)
        }
        return state
    }
    for _ in 0..<500 {
        let (old, new) = (randomState(), randomState())
        var view = WatcherView(old)
        view.apply(old.changes(to: new))
        #expect(view == WatcherView(new))
        // The changes of each message, one at a time, as a follower is told them.
        var state = old
        view = WatcherView(old)
        for _ in 0..<10 {
            let message = randomMessage()
            view.apply(state.apply(topic: message.topic, payload: message.payload))
            #expect(view == WatcherView(state))
        }
    }
    #expect(randomState().unreadable == 0)
}

@Test func aClaimTakenOrReleasedIsADisconnectionAndAConnectionOfItsAccessory() {
    var state = FleetState(topics: topics)
    let stick = Accessory(kind: .usb, connectionID: ConnectionID(7), name: "stick", vendorID: "1209", productID: "0001")
    let claimTopic = topics.claim(host: "h", accessoryID: stick.accessoryID, connectionID: 7)
    // The claims as read: with the accessory id their payload names.
    let (first, second) = (on(claims[0], stick), on(claims[1], stick))
    // A claim topic before its accessory's: kept, nothing shown yet.
    #expect(state.apply(topic: claimTopic, payload: claimPayload("h", stick, claims[0])) == [])
    let topic = topics.accessory(host: "h", accessoryID: stick.accessoryID, connectionID: 7)
    #expect(state.apply(topic: topic, payload: objectPayload(stick)) == [.connected(host: "h", stick, claim: first)])
    #expect(
        state.apply(topic: claimTopic, payload: claimPayload("h", stick, claims[1]))
            == [.disconnected(host: "h", stick, claim: first), .connected(host: "h", stick, claim: second)])
    #expect(state.apply(topic: claimTopic, payload: claimPayload("h", stick, claims[1])) == [], "the same claim again")
    #expect(
        state.apply(topic: claimTopic, payload: [])
            == [.disconnected(host: "h", stick, claim: second), .connected(host: "h", stick)])
    #expect(state.apply(topic: claimTopic, payload: Array("held".utf8)) == [])
    #expect(state.unreadable == 1)
}

@Test func aStatusChangingOnlyItsCountIsKeptWithoutTellingWatchers() {
    var state = FleetState(topics: topics)
    var online = status("lab-1", .online)
    #expect(
        state.apply(topic: topics.status(host: "lab-1"), payload: online.payload) == [.status(host: "lab-1", online)])
    online.retained = ["accessories": 4]
    #expect(state.apply(topic: topics.status(host: "lab-1"), payload: online.payload) == [])
    #expect(state.hosts["lab-1"]?.status?.retainedCount(.accessories) == 4, "kept for the reader's checks")
    var offline = online.with(.offline, reason: "stopped")
    offline.retained = ["accessories": 5]
    #expect(
        state.apply(topic: topics.status(host: "lab-1"), payload: offline.payload)
            == [.status(host: "lab-1", offline.withoutCounts)])
    #expect(state.apply(topic: topics.indexEntry(host: "lab-1"), payload: HostIndex.payload(host: "lab-1")) == [])
}

@Test func replacingAHostTellsTheDifference() {
    var state = FleetState(topics: topics)
    let kept = Accessory(kind: .usb, connectionID: ConnectionID(1), name: "kept")
    let gone = Accessory(kind: .usb, connectionID: ConnectionID(2), name: "gone")
    let new = Accessory(kind: .serial, connectionID: ConnectionID(3), name: "new")
    for accessory in [kept, gone] {
        _ = state.apply(
            topic: topics.accessory(
                host: "h", accessoryID: accessory.accessoryID, connectionID: accessory.connectionID.rawValue),
            payload: objectPayload(accessory))
    }
    var fresh = state.hosts["h"]!
    fresh.accessories[2] = nil
    fresh.accessories[3] = new
    #expect(state.replaceHost(level: "h", with: fresh) == [.disconnected(host: "h", gone), .connected(host: "h", new)])
    #expect(state.hosts["h"]?.sortedAccessories == [kept, new])
    #expect(
        state.replaceHost(level: "h", with: nil) == [.disconnected(host: "h", kept), .disconnected(host: "h", new)])
    #expect(state.hosts.isEmpty)
}

@Test func anAccessoryObjectIsReadInTheBridgesFormAndInAnyOther() {
    var random = SplitMix64(seed: SplitMix64.testSeed())
    for _ in 0..<2_000 {
        let accessory = Fixtures.randomAccessory(using: &random)
        var state = FleetState(topics: topics)
        let topic = topics.accessory(
            host: "h", accessoryID: accessory.accessoryID, connectionID: accessory.connectionID.rawValue)
        #expect(state.apply(topic: topic, payload: objectPayload(accessory)) == [.connected(host: "h", accessory)])
        // Spaces and another key order: not the bridge's form, read all the same.
        let reordered = try! JSONSerialization.data(
            withJSONObject: JSONSerialization.jsonObject(with: Data(objectPayload(accessory))),
            options: [.prettyPrinted])
        var other = FleetState(topics: topics)
        #expect(other.apply(topic: topic, payload: Array(reordered)) == [.connected(host: "h", accessory)])
    }
}

/// The fleet's JSON line, written directly, is byte for byte what JSONEncoder writes (sorted keys, slashes as they
/// are), for any hosts and accessories.
@Test func theFleetsJSONLineIsWhatJSONEncoderWrites() throws {
    var random = SplitMix64(seed: SplitMix64.testSeed())
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    struct Line: Encodable {
        var hosts: [FleetHostOutput]
        var type = "fleet"
    }
    for _ in 0..<300 {
        let hosts = (0..<random.next(below: 4)).map { _ in
            FleetHostOutput(
                host: Fixtures.randomText(using: &random), state: Bool.random(using: &random) ? "online" : "unknown",
                status: Bool.random(using: &random)
                    ? HostStatus(
                        state: .offline, host: Fixtures.randomText(using: &random), machineID: "m/1", runID: "r",
                        since: 1_796_144_465.2613926, bridge: "0.1.0", reason: "stopped") : nil,
                accessories: (0..<random.next(below: 4)).map { _ in Fixtures.randomAccessory(using: &random) })
        }.map { host in
            // Some accessories claimed, with any text in the claim.
            var claimed = host
            for accessory in host.accessories where random.next(below: 3) == 0 {
                var claim = claims.randomElement(using: &random)!
                claim.reason = Fixtures.randomText(using: &random)
                claim.holder.user = Fixtures.randomText(using: &random)
                claimed.claims[accessory.connectionID.rawValue] = claim
            }
            return claimed
        }
        let expected = Array(try encoder.encode(Line(hosts: hosts))) + [UInt8(ascii: "\n")]
        let written = FleetHostOutput.jsonLine(hosts, then: #","type":"fleet"}"#)
        #expect(
            written == expected,
            "\(String(decoding: written, as: UTF8.self))\n\(String(decoding: expected, as: UTF8.self))")
    }
}

/// A leased online status runs out when no renewal comes: what was left of its message expiry when it arrived (the
/// whole lease when the broker gave no expiry); the host is then shown stale, never online, until a status comes.
@Test func aHostWhoseLeaseRunsOutIsStaleUntilAStatusComes() {
    let topics = FleetTopics(prefix: "accmon")
    var state = FleetState(topics: topics)
    var online = HostStatus(
        state: .online, host: "lab-1", machineID: "m", runID: "r", since: 1, bridge: "0.1.0", lease: 20)
    let second: UInt64 = 1_000_000_000
    let topic = topics.parse(topics.status(host: "lab-1"))!
    var changes = state.apply(topic, payload: online.payload, expiry: 7, at: 100 * second)
    #expect(changes == [.status(host: "lab-1", online)])
    #expect(state.hosts["lab-1"]?.leaseEnds == 107 * second, "what was left of the expiry")
    #expect(state.leasesRunOut(now: 106 * second).isEmpty)
    #expect(state.nextLeaseEnd == 107 * second)
    #expect(state.leasesRunOut(now: 107 * second) == ["lab-1"])
    changes = state.markStale(level: "lab-1")
    #expect(changes == [.status(host: "lab-1", online, stale: true)])
    #expect(state.hosts["lab-1"]?.stateName == "stale")
    #expect(state.markStale(level: "lab-1").isEmpty, "told once")
    #expect(state.leasesRunOut(now: 200 * second).isEmpty && state.nextLeaseEnd == nil)
    // A renewal (the same status) brings it back online: a watcher is told.
    changes = state.apply(topic, payload: online.payload, at: 300 * second)
    #expect(changes == [.status(host: "lab-1", online)])
    #expect(state.hosts["lab-1"]?.stateName == "online")
    #expect(state.hosts["lab-1"]?.leaseEnds == 320 * second, "no expiry given: the whole lease")
    // A renewal while online changes nothing a watcher sees; its count neither.
    online.retained = ["accessories": 0]
    changes = state.apply(topic, payload: online.payload, expiry: 20, at: 310 * second)
    #expect(changes.isEmpty && state.hosts["lab-1"]?.leaseEnds == 330 * second)
    // An offline status is no lease; nor is a status read by a reader that does not follow leases.
    _ = state.apply(topic, payload: online.with(.offline).payload, at: 320 * second)
    #expect(state.hosts["lab-1"]?.leaseEnds == nil)
    _ = state.apply(topic, payload: online.payload)
    #expect(state.hosts["lab-1"]?.leaseEnds == nil)
    // A watcher that saw the host online and sees it stale is told so by the difference of the states.
    var stale = state
    _ = stale.markStale(level: "lab-1")
    #expect(state.changes(to: stale) == [.status(host: "lab-1", online.withoutCounts, stale: true)])
}

/// A watcher reads a host again and finds less than the host's count says (a cluster node that does not serve every
/// retained message): what it showed stays, unconfirmed, never a disconnection it did not see; the broker's deletion
/// or the host's count settles it, and a read that finds it again confirms it.
@Test func anAccessoryMissingFromAReadAgainIsUnconfirmedNotGone() {
    var state = FleetState(topics: topics)
    let sticks = (1...3).map {
        Accessory(kind: .usb, connectionID: ConnectionID(UInt64($0)), name: "s\($0)", vendorID: "1209", productID: "0001")
    }
    func topic(_ accessory: Accessory) -> String {
        topics.accessory(host: "lab-1", accessoryID: accessory.accessoryID, connectionID: accessory.connectionID.rawValue)
    }
    var counted = status("lab-1", .online)
    counted.retained = ["accessories": 3]
    _ = state.apply(topic: topics.status(host: "lab-1"), payload: counted.payload)
    for stick in sticks { _ = state.apply(topic: topic(stick), payload: objectPayload(stick)) }

    // The read again found only the first, and no status: two unconfirmed, the status kept.
    var read = FleetHost(level: "lab-1")
    read.accessories[1] = sticks[0]
    var changes = state.takeRead(level: "lab-1", read: read)
    #expect(changes == [.unconfirmed(host: "lab-1", sticks[1]), .unconfirmed(host: "lab-1", sticks[2])])
    #expect(state.hosts["lab-1"]?.accessories.count == 3 && state.hosts["lab-1"]?.status == counted)
    #expect(state.hosts["lab-1"]?.unconfirmed == [2, 3])
    // The same read again says nothing new.
    #expect(state.takeRead(level: "lab-1", read: read) == [])

    // The broker confirms one deletion: a disconnection.
    changes = state.apply(topic: topic(sticks[1]), payload: [])
    #expect(changes == [.disconnected(host: "lab-1", sticks[1])])
    // A read finds the third again: confirmed.
    read.accessories[3] = sticks[2]
    changes = state.takeRead(level: "lab-1", read: read)
    #expect(changes == [.confirmed(host: "lab-1", sticks[2])])
    #expect(state.hosts["lab-1"]?.unconfirmed == [])

    // Unconfirmed again, then the host's count says it is gone: the host said so.
    read.accessories[3] = nil
    #expect(state.takeRead(level: "lab-1", read: read) == [.unconfirmed(host: "lab-1", sticks[2])])
    var one = counted
    one.retained = ["accessories": 1]
    changes = state.apply(topic: topics.status(host: "lab-1"), payload: one.payload)
    #expect(changes == [.disconnected(host: "lab-1", sticks[2])])
    #expect(state.hosts["lab-1"]?.accessories.keys.sorted() == [1])

    // A read whole by the host's count is believed: what it lacks is gone.
    _ = state.apply(topic: topic(sticks[1]), payload: objectPayload(sticks[1]))
    var whole = FleetHost(level: "lab-1")
    whole.status = one
    whole.accessories[2] = sticks[1]
    changes = state.takeRead(level: "lab-1", read: whole)
    #expect(changes == [.disconnected(host: "lab-1", sticks[0])])
}
