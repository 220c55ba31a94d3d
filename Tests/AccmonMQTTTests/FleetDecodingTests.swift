import AccmonProtocol
import FoundationEssentials
import Synchronization
import Testing

@testable import AccmonMQTT

/// A one-time read's decoding (FleetSession+Decoding.swift), driven through the session's own entry points without a
/// broker: a host's window ends and the host goes to the decoder; messages on that host that come later (a change
/// published meanwhile) are applied once the decoder is done, and the host is handed over again. What `eachHost` was
/// given last for a host is the host in the result.
@Suite struct FleetDecodingTests {
    /// What `eachHost` was given, in order (on the decoder's thread, then the reader's).
    final class Given: Sendable {
        private let hosts = Mutex<[FleetHost]>([])
        func append(_ host: FleetHost) { hosts.withLock { $0.append(host) } }
        var all: [FleetHost] { hosts.withLock { $0 } }
    }

    let topics = FleetTopics(prefix: "accmon")

    func accessory(_ connection: UInt64) -> Accessory {
        Accessory(
            kind: .serial, connectionID: ConnectionID(connection), name: "serial \(connection)",
            serialNumber: "S\(connection)", vendorID: "1209", productID: "000\(connection)",
            deviceNodes: ["/dev/ttyUSB\(connection)"], portPath: "1-1.\(connection)")
    }

    func accessoryMessage(
        _ host: String, _ connection: UInt64, payload: [UInt8]? = nil
    ) -> (
        FleetTopics.Topic, [UInt8]
    ) {
        let accessory = accessory(connection)
        let topic = topics.accessory(host: host, accessoryID: accessory.accessoryID, connectionID: connection)
        let bytes =
            payload ?? JSONOutput.bytes(startingOnTheStack: 1024) { EventLineWriter.accessory(accessory, into: &$0) }
        return (topics.parse(topic)!, bytes)
    }

    func statusMessage(_ host: String, run: String, accessories: Int) -> (FleetTopics.Topic, [UInt8]) {
        let status = HostStatus(
            state: .online, host: host, machineID: "m", runID: run, since: 1, bridge: "0.1.0",
            retained: ["accessories": accessories])
        return (topics.parse(topics.status(host: host))!, status.payload)
    }

    func claimMessage(_ host: String, _ connection: UInt64, holder: String) throws -> (FleetTopics.Topic, [UInt8]) {
        let accessory = accessory(connection)
        let summary = ClaimSummary(
            claimID: "c-\(connection)", holder: Party(user: holder, remote: true), since: 1, reason: "test",
            waiting: 0, connections: [accessory.connectionID], accessoryIDs: [accessory.accessoryID])
        let state = RemoteClaimState(
            host: host, accessoryID: accessory.accessoryID, connectionID: connection, summary: summary)
        let topic = topics.claim(host: host, accessoryID: accessory.accessoryID, connectionID: connection)
        return (topics.parse(topic)!, Array(try JSONEncoder().encode(state)))
    }

    /// A session reading `hosts` in one window that holds payloads, as `list --broker` starts it, with what
    /// `eachHost` is given collected.
    func session(reading hosts: [String: Int], given: Given) -> FleetSession {
        let session = FleetSession(
            settings: BrokerSettings(address: BrokerAddress(host: "127.0.0.1", port: 1883, usesTLS: false)),
            topics: topics, options: FleetReadOptions(), follows: false,
            eachHost: { given.append($0) })
        session.decoding = FleetSession.Decoding(decoder: AccessoryDecoder(handOver: session.eachHost))
        session.phase = .hosts
        for (level, count) in hosts {
            session.listed.insert(level)
            session.plan.add(level: level, expected: count)
        }
        var window = FleetWindow(
            kind: .hosts(session.plan.nextWindow()), filters: [], keep: false, number: 1, lastPacket: 0,
            fresh: FleetState(topics: topics))
        window.levels = Set(hosts.keys)
        window.holdsPayloads = true
        window.endedWith = 0
        session.window = window
        return session
    }

    @Test func changesAfterAHostWasHandedOverReachTheResultAndAreHandedOverAgain() throws {
        let given = Given()
        let session = session(reading: ["lab-1": 2, "lab-2": 1], given: given)
        for (topic, payload) in [
            statusMessage("lab-1", run: "r1", accessories: 2), accessoryMessage("lab-1", 1),
            accessoryMessage("lab-1", 2), statusMessage("lab-2", run: "r1", accessories: 1),
            accessoryMessage("lab-2", 1),
        ] {
            session.message(topic, payload: payload)
        }
        session.finishWindow()
        #expect(session.window == nil && session.decoding?.handedOver == ["lab-1", "lab-2"])

        // Published while the reader went on: on lab-1 a new accessory, one gone and a claim; on lab-2 a new run.
        for (topic, payload) in [
            accessoryMessage("lab-1", 3), accessoryMessage("lab-1", 1, payload: []),
            try claimMessage("lab-1", 2, holder: "ci"), statusMessage("lab-2", run: "r2", accessories: 1),
        ] {
            session.message(topic, payload: payload)
        }
        #expect(session.decoding?.later.count == 2 && session.decoding?.changed == ["lab-1", "lab-2"])
        session.finishDecoding()

        let lab1 = try #require(session.state.hosts["lab-1"])
        #expect(lab1.accessories.keys.sorted() == [2, 3])
        #expect(lab1.accessories[3] == accessory(3) && lab1.claims[2]?.holder.user == "ci")
        let lab2 = try #require(session.state.hosts["lab-2"])
        #expect(lab2.status?.runID == "r2" && lab2.accessories.keys.sorted() == [1])
        #expect(session.warnings.isEmpty && !session.incomplete)

        // Each host twice: as its window read it (decoded), then as it ended.
        let handed = given.all
        for level in ["lab-1", "lab-2"] {
            let forHost = handed.filter { $0.level == level }
            #expect(forHost.count == 2, "\(level): \(forHost)")
            #expect(forHost.last == session.state.hosts[level], "\(level)")
        }
        #expect(handed.first { $0.level == "lab-1" }?.accessories.keys.sorted() == [1, 2])
    }

    @Test func aHostNotChangedAfterItsHandOverIsHandedOverOnce() throws {
        let given = Given()
        let session = session(reading: ["lab-1": 1], given: given)
        for (topic, payload) in [statusMessage("lab-1", run: "r1", accessories: 1), accessoryMessage("lab-1", 7)] {
            session.message(topic, payload: payload)
        }
        session.finishWindow()
        // A message on a host the read did not hand over is not kept for later.
        let (other, payload) = accessoryMessage("lab-9", 1)
        session.message(other, payload: payload)
        #expect(session.decoding?.later.isEmpty == true && session.decoding?.changed.isEmpty == true)
        session.finishDecoding()
        let handed = given.all
        #expect(handed.count == 1 && handed.first == session.state.hosts["lab-1"])
        #expect(session.state.hosts["lab-1"]?.accessories.keys.sorted() == [7])
    }
}
