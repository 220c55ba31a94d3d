import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Testing

@testable import AccmonBridge

/// A broker for the relay: applies publications in the order they were sent, confirms them in any order, and can lose
/// what is in flight.
private final class FakeBroker: MessagePublisher {
    struct Message {
        var id: Int32
        var topic: String
        var payload: [UInt8]
        var retained: Bool
    }
    var retained: [String: [UInt8]] = [:]
    /// Sent, not yet applied.
    var sending: [Message] = []
    /// Applied, PUBACK not yet reported.
    var unconfirmed: [Int32] = []
    /// The event lines that reached the events topic, as text (readable in a failure).
    var lines: Set<String> = []
    var nextID: Int32 = 1
    /// The connection broke without the client knowing yet: every publication fails as a write would.
    var failing = false
    let eventsTopic: String

    init(eventsTopic: String) { self.eventsTopic = eventsTopic }

    func publish(topic: String, payload: [UInt8], retained: Bool) throws(MQTTError) -> Int32 {
        if topic.contains("unpublishable") { throw MQTTError(.invalidMessage, "mqtt: publish to '\(topic)': too long") }
        if failing { throw MQTTError(.unreachable, "mqtt: publish to '\(topic)': Broken pipe") }
        defer { nextID += 1 }
        sending.append(Message(id: nextID, topic: topic, payload: payload, retained: retained))
        return nextID
    }

    func applyNext() {
        let message = sending.removeFirst()
        if message.retained { retained[message.topic] = message.payload.isEmpty ? nil : message.payload }
        if message.topic == eventsTopic { lines.insert(String(decoding: message.payload, as: UTF8.self)) }
        unconfirmed.append(message.id)
    }

    /// The connection breaks: some of what was sent arrived, the rest did not; no PUBACK comes.
    func lose(arriving count: Int) {
        for _ in 0..<min(count, sending.count) { applyNext() }
        sending = []
        unconfirmed = []
        failing = false
    }
}

@Test func theRelayAcknowledgesOnlyWhatTheBrokerHoldsAndEndsWithTheTruth() {
    var random = SplitMix64(seed: SplitMix64.testSeed())
    let topics = FleetTopics(prefix: "accmon")
    let ids = ["usb:1209:0001", "usb:1209:0001", "serial:0403:6001:serial=A", "usb:-:-:sysfs=/x/unpublishable", "b"]
    for _ in 0..<200 {
        let broker = FakeBroker(eventsTopic: topics.events(host: "h"))
        var relay = EventRelay(topics: topics, host: "h")
        var truth: [ConnectionID: Accessory] = [:]
        var lineOf: [UInt64: [UInt8]] = [:]
        var sequence: UInt64 = 0
        var nextConnection: UInt64 = 1
        var sessionStart: UInt64 = 0
        var ready = false
        broker.retained["accmon/h/accessories/ghost/99"] = Array("{}".utf8)
        relay.beginSession([])
        func synchronize() {
            if broker.failing {
                // The broken connection is noticed before any synchronization: it ends.
                broker.lose(arriving: Int(random.next(below: 4)))
                relay.brokerLost()
            }
            while !broker.sending.isEmpty { broker.applyNext() }
            let read = broker.retained.filter { $0.key.hasPrefix("accmon/h/accessories/") }
            _ = relay.synchronized(retained: read, publisher: broker)
            ready = true
        }
        func checkAcknowledgement() {
            guard let acknowledged = relay.takeAcknowledgement() else { return }
            for (seq, line) in lineOf where seq > sessionStart && seq <= acknowledged {
                #expect(
                    broker.lines.contains(String(decoding: line, as: UTF8.self)),
                    "seq \(seq) acknowledged before the broker had its line")
            }
        }
        for _ in 0..<300 {
            switch random.next(below: 20) {
            case 0..<8:
                sequence += 1
                let event: AccessoryEvent
                if let gone = truth.keys.randomElement(using: &random), random.next(below: 2) == 0 {
                    event = AccessoryEvent(.disconnect, sequence: sequence, accessory: truth.removeValue(forKey: gone)!)
                } else {
                    let accessory = Accessory(
                        kind: .usb, accessoryID: ids.randomElement(using: &random)!,
                        connectionID: ConnectionID(nextConnection), name: "n\(nextConnection)")
                    nextConnection += 1
                    truth[accessory.connectionID] = accessory
                    event = AccessoryEvent(.connect, sequence: sequence, accessory: accessory)
                }
                let line = Array(ProtocolCodec().encode(.event(event)).dropLast())
                lineOf[sequence] = line
                _ = relay.receive(RelayedEvent(event: event, line: line), publisher: ready ? broker : nil)
            case 8..<12:
                if !broker.sending.isEmpty { broker.applyNext() }
            case 12..<16:
                if let index = broker.unconfirmed.indices.randomElement(using: &random) {
                    _ = relay.confirmed(broker.unconfirmed.remove(at: index), error: nil)
                    checkAcknowledgement()
                }
            case 16:
                if ready {
                    broker.lose(arriving: Int(random.next(below: 4)))
                    relay.brokerLost()
                    ready = false
                }
            case 17:
                if !ready { synchronize() }
            case 18:
                if ready { broker.failing = true }  // the loss is noticed at the next "lose" step
            default:
                // accmond's session starts again with the same truth (a daemon restart); the broker is synchronized.
                relay.beginSession(Array(truth.values))
                sessionStart = sequence
                ready = false
            }
        }
        if !ready || broker.failing { synchronize() }
        while !broker.sending.isEmpty { broker.applyNext() }
        for id in broker.unconfirmed { _ = relay.confirmed(id, error: nil) }
        broker.unconfirmed = []
        checkAcknowledgement()
        #expect(relay.backlog == 0)
        #expect(relay.view == truth)
        let expected = Dictionary(
            uniqueKeysWithValues: truth.values.filter { !$0.accessoryID.contains("unpublishable") }.map {
                (relay.topic(of: $0), String(decoding: EventRelay.payload(of: $0), as: UTF8.self))
            })
        let retained = broker.retained.filter { $0.key.hasPrefix("accmon/h/accessories/") }
        #expect(retained.mapValues { String(decoding: $0, as: UTF8.self) } == expected)
        #expect(relay.retainedCount == retained.count, "the count the status carries is what the broker holds")
        for (seq, line) in lineOf where seq > sessionStart {
            #expect(
                broker.lines.contains(String(decoding: line, as: UTF8.self)),
                "the line of seq \(seq) never reached the broker")
        }
    }
}

@Test func anUnpublishableEventIsSkippedWithoutHoldingUpTheOthers() {
    let topics = FleetTopics(prefix: "accmon")
    let broker = FakeBroker(eventsTopic: topics.events(host: "h"))
    var relay = EventRelay(topics: topics, host: "h")
    relay.beginSession([])
    _ = relay.synchronized(retained: [:], publisher: broker)
    let bad = Accessory(kind: .usb, accessoryID: "unpublishable", connectionID: ConnectionID(1))
    let notes = relay.receive(
        RelayedEvent(event: AccessoryEvent(.connect, sequence: 1, accessory: bad), line: Array("l1".utf8)),
        publisher: broker)
    #expect(notes.count == 1)
    if case .skipped(let topic, let error)? = notes.first {
        #expect(topic == "accmon/h/accessories/unpublishable/1")
        #expect(error.message.contains("too long"))
    }
    let good = Accessory(kind: .usb, accessoryID: "fine", connectionID: ConnectionID(2))
    _ = relay.receive(
        RelayedEvent(event: AccessoryEvent(.connect, sequence: 2, accessory: good), line: Array("l2".utf8)),
        publisher: broker)
    while !broker.sending.isEmpty { broker.applyNext() }
    for id in broker.unconfirmed {
        let note = relay.confirmed(id, error: nil)
        #expect(note == nil)
    }
    let acknowledged = relay.takeAcknowledgement()
    #expect(acknowledged == 2)
}

@Test func aRefusedPublicationIsReportedAndStillReleased() {
    let topics = FleetTopics(prefix: "accmon")
    let broker = FakeBroker(eventsTopic: topics.events(host: "h"))
    var relay = EventRelay(topics: topics, host: "h")
    relay.beginSession([])
    _ = relay.synchronized(retained: [:], publisher: broker)
    let accessory = Accessory(kind: .usb, connectionID: ConnectionID(1))
    _ = relay.receive(
        RelayedEvent(event: AccessoryEvent(.connect, sequence: 5, accessory: accessory), line: Array("l".utf8)),
        publisher: broker)
    while !broker.sending.isEmpty { broker.applyNext() }
    let refusal = MQTTError(.notAuthorized, "mqtt: the broker refused a publication: Not authorized (reason code 135)")
    let note = relay.confirmed(broker.unconfirmed[0], error: refusal)
    #expect(note == .refused(refusal))
    var acknowledged = relay.takeAcknowledgement()
    #expect(acknowledged == nil)
    _ = relay.confirmed(broker.unconfirmed[1], error: nil)
    acknowledged = relay.takeAcknowledgement()
    #expect(acknowledged == 5)
}
