import AccmonMQTT
import AccmonProtocol
import AccmonSys
import Foundation
import Glibc

/// A fleet published straight to the broker in the shape accmon-mqtt publishes (docs/MQTT.md §3), without bridges:
/// for fleets bigger than a test can run bridges for. Host `i` is `lab-0000i`, with `accessories` serial accessories.
struct SyntheticFleet {
    let hosts: Int
    let accessories: Int
    /// Every `legacyEvery`-th host is published as a bridge older than the counts does: its status without counts and
    /// no host index entry.
    var legacyEvery: Int?
    let topics = FleetTopics(prefix: "accmon")

    static func name(_ host: Int) -> String { String(format: "lab-%05d", host) }

    func isLegacy(_ host: Int) -> Bool { legacyEvery.map { host % $0 == $0 - 1 } ?? false }

    static func accessory(host: Int, _ index: Int) -> Accessory {
        Accessory(
            kind: .serial, connectionID: ConnectionID(UInt64(index + 1)), name: "serial \(index)",
            serialNumber: "S\(host)-\(index)", vendorID: "1209", productID: String(format: "%04x", index + 1),
            deviceNodes: ["/dev/ttyUSB\(index)"], portPath: "1-1.\(index)")
    }

    func status(_ host: Int, accessories count: Int) -> HostStatus {
        HostStatus(
            state: .online, host: Self.name(host), machineID: "machine-\(host)", runID: "run-\(host)", since: 1,
            bridge: "0.1.0", retained: isLegacy(host) ? nil : ["accessories": count])
    }

    /// What each host holds: host name → connection → accessory.
    var truth: [String: [UInt64: Accessory]] {
        var truth: [String: [UInt64: Accessory]] = [:]
        for host in 0..<hosts {
            truth[Self.name(host)] = Dictionary(
                uniqueKeysWithValues: (0..<accessories).map { (UInt64($0 + 1), Self.accessory(host: host, $0)) })
        }
        return truth
    }

    /// Every retained message of the fleet.
    var messages: [(topic: String, payload: [UInt8])] {
        var messages: [(topic: String, payload: [UInt8])] = []
        for host in 0..<hosts {
            let name = Self.name(host)
            messages.append((topics.status(host: name), status(host, accessories: accessories).payload))
            if !isLegacy(host) { messages.append((topics.indexEntry(host: name), HostIndex.payload(host: name))) }
            for index in 0..<accessories {
                messages.append(Self.accessoryMessage(topics, host: host, index))
            }
        }
        return messages
    }

    /// The retained topic of an accessory and its object, as the bridge writes it.
    static func accessoryMessage(_ topics: FleetTopics, host: Int, _ index: Int) -> (topic: String, payload: [UInt8]) {
        let accessory = accessory(host: host, index)
        return (
            topics.accessory(
                host: name(host), accessoryID: accessory.accessoryID, connectionID: accessory.connectionID.rawValue),
            JSONOutput.bytes(startingOnTheStack: 1024) { EventLineWriter.accessory(accessory, into: &$0) }
        )
    }
}

/// Publishes `messages` retained (QoS 0, in order) through one connection, then a QoS 1 message whose PUBACK says the
/// broker has handled them all. On a thread of its own: the loop blocks in `poll`.
func publishRetained(_ messages: [(topic: String, payload: [UInt8])], to broker: Mosquitto) async throws {
    let settings = try BrokerSettings(address: BrokerAddress.parse(broker.url).get(), keepAliveSeconds: 30)
    let sendable = messages.map { SendableMessage(topic: $0.topic, payload: $0.payload) }
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
        let thread = Thread {
            continuation.resume(with: Result { try publishBlocking(sendable, settings: settings) })
        }
        thread.start()
    }
}

private struct SendableMessage: Sendable {
    var topic: String
    var payload: [UInt8]
}

private func publishBlocking(_ messages: [SendableMessage], settings: BrokerSettings) throws {
    let client = try MQTTClient(clientID: "test-publisher-\(UInt32.random(in: 0...UInt32.max))", settings: settings)
    defer { client.disconnect() }
    try client.connect(address: settings.address, keepAliveSeconds: settings.keepAliveSeconds)
    var connected = false
    var barrier: Int32?
    var barrierDone = false
    func drive() throws {
        guard let socket = client.socket else { throw MQTTError(.unreachable, "test publisher: connection closed") }
        var wait = pollfd(fd: socket.rawValue, events: Int16(POLLIN | (client.wantsWrite ? POLLOUT : 0)), revents: 0)
        _ = poll(&wait, 1, 100)
        if wait.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 { client.read() }
        if wait.revents & Int16(POLLOUT) != 0 { client.write() }
        client.housekeeping()
        for event in client.takeEvents() {
            switch event {
            case .connected(nil): connected = true
            case .connected(let error?), .disconnected(let error?): throw error
            case .published(let id, _) where id == barrier: barrierDone = true
            default: break
            }
        }
    }
    let deadline = Date().addingTimeInterval(60)
    while !connected {
        guard Date() < deadline else { throw MQTTError(.unreachable, "test publisher: not connected") }
        try drive()
    }
    for chunk in stride(from: 0, to: messages.count, by: 500) {
        for message in messages[chunk..<min(chunk + 500, messages.count)] {
            _ = try client.publish(topic: message.topic, payload: message.payload, retained: true, qos: 0)
        }
        while client.wantsWrite { try drive() }
    }
    barrier = try client.publish(topic: "test/barrier", payload: [1], retained: false)
    while !barrierDone {
        guard Date() < deadline else { throw MQTTError(.unreachable, "test publisher: no PUBACK") }
        try drive()
    }
}
