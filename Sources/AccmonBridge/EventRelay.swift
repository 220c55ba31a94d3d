import AccmonMQTT
import AccmonProtocol

/// What publishes to the broker: ``MQTTClient``, or a fake in tests.
protocol MessagePublisher: AnyObject {
    /// Publishes with QoS 1; returns the message id its PUBACK will carry.
    func publish(topic: String, payload: [UInt8], retained: Bool) throws(MQTTError) -> Int32
}

extension MQTTClient: MessagePublisher {}

/// An event from accmond with its line as accmond wrote it (the events topic's payload).
struct RelayedEvent: Sendable, Hashable {
    var event: AccessoryEvent
    var line: [UInt8]
}

/// Something to log about the relay's publications.
enum RelayNote: Sendable, Hashable {
    /// A publication could not be sent at all (the topic or payload is not one MQTT carries); it is skipped.
    case skipped(topic: String, MQTTError)
    /// The broker refused a publication (PUBACK with an error reason code, such as not authorized).
    case refused(MQTTError)
}

/// The bridge's view of accmond's truth and the publications that carry it to the broker. Pure: no I/O (the
/// publisher is passed in).
///
/// - While the broker is ready, each event is published at once: its retained topic (the accessory object on
///   connect, a deletion on disconnect) and its event line.
/// - Otherwise events wait in order. When the broker is synchronized (its retained topics of this host were read
///   back), the relay publishes what makes them equal to ``view``, which already holds every waiting event, then the
///   waiting events' lines.
/// - An event is acknowledged to accmond (``takeAcknowledgement()``) once the broker acknowledged its publications
///   and those of everything before it (``PublicationLedger``).
struct EventRelay {
    let topics: FleetTopics
    let host: String
    /// accmond's truth as the bridge knows it: every accessory connected, by connection.
    private(set) var view: [ConnectionID: Accessory] = [:]
    /// The connections of ``view`` whose retained topic MQTT cannot carry (skipped): the broker holds none for them.
    private var unpublishable: Set<ConnectionID> = []
    /// Events received while the broker was not ready, to publish in order once it is.
    private var waiting: [RelayedEvent] = []
    private var ledger = PublicationLedger<RelayedEvent>()
    /// The highest sequence number acknowledged in the current accmond session.
    private var acknowledged: UInt64 = 0
    /// The retained accessory topics published with a payload and not deleted since, this run's and (``adopt(_:)``)
    /// earlier runs': what the bridge deletes at a synchronization when not desired, whether or not the broker
    /// showed them (a cluster node that does not serve every retained message, docs/MQTT.md §4).
    private(set) var published: Set<String> = []
    /// Told each topic before its first publication with a payload (it joins ``published``), to keep it across a
    /// crash (``PublishedTopicsFile``).
    var journal: ((String) -> Void)?
    /// What the retained topics published hold, as the census's digest (``Census/Digest``).
    private var retainedHashes = Census.Digest()
    /// Whether a publication failed because the connection did (its loss is reported next): publish nothing more on
    /// it, so that nothing after the failed event can be acknowledged before it.
    private var connectionFailed = false

    init(topics: FleetTopics, host: String) {
        self.topics = topics
        self.host = host
    }

    /// Events received and not yet released: the bridge reads no more from accmond above a bound of this.
    var backlog: Int { waiting.count + ledger.count }

    /// The number of the host's retained accessory topics once what was published is in the broker: the count its
    /// status carries.
    var retainedCount: Int { view.count - unpublishable.count }

    /// Starts a new accmond session whose truth is `accessories` (a snapshot, or a restore's known accessories; its
    /// replay follows as events). What was waiting or in flight belongs to the previous session: accmond replays what
    /// was not acknowledged, and the caller reconciles the broker with the new view.
    mutating func beginSession(_ accessories: [Accessory]) {
        view = Dictionary(accessories.map { ($0.connectionID, $0) }) { first, _ in first }
        unpublishable = []
        waiting = []
        _ = ledger.removeAll()
        acknowledged = 0
    }

    /// Takes in an event: applies it to ``view``, and publishes it now when `publisher` (the broker is ready) is given.
    mutating func receive(_ relayed: RelayedEvent, publisher: (any MessagePublisher)?) -> [RelayNote] {
        let accessory = relayed.event.accessory
        switch relayed.event.change {
        case .connect: view[accessory.connectionID] = accessory
        case .disconnect:
            view[accessory.connectionID] = nil
            unpublishable.remove(accessory.connectionID)
        }
        guard let publisher, !connectionFailed else {
            waiting.append(relayed)
            return []
        }
        return publish(relayed, retainedToo: true, publisher)
    }

    /// The connection to the broker was lost: what was in flight waits again, to be published after the next
    /// synchronization (an event line may so reach the events topic twice).
    mutating func brokerLost() {
        waiting = ledger.removeAll() + waiting
        connectionFailed = false
    }

    /// Takes the topics an earlier run published and did not delete (read from the state directory).
    mutating func adopt(_ topics: Set<String>) { published.formUnion(topics) }

    /// The broker's retained accessory topics of this host were read back (`retained`, topic to payload): publishes
    /// what makes them equal to ``view``, then the lines of the waiting events. A topic this bridge published and did
    /// not delete counts as retained even when the broker did not show it: deleted unless desired. Returns the notes,
    /// the number of retained topics corrected, and the topics published that the broker did not show.
    mutating func synchronized(
        retained: [String: [UInt8]], publisher: any MessagePublisher
    ) -> (
        notes: [RelayNote], corrected: Int, unshown: Int
    ) {
        let desired = Dictionary(view.values.map { (topic(of: $0), Self.payload(of: $0)) }) { first, _ in first }
        let connections = Dictionary(view.values.map { (topic(of: $0), $0.connectionID) }) { first, _ in first }
        var known = retained
        let unshown = published.filter { retained[$0] == nil }
        // Not an accessory object: never equal to a desired payload, so a desired topic is published again.
        for topic in unshown { known[topic] = [0] }
        let publications = RetainedReconciliation.publications(desired: desired, retained: known)
        connectionFailed = false
        unpublishable = []
        var notes: [RelayNote] = []
        var messages: [Int32] = []
        for publication in publications where !connectionFailed {
            let sent = send(
                publication.topic, publication.payload, retained: true, publisher, into: &messages, notes: &notes)
            if !sent, !publication.payload.isEmpty, let connection = connections[publication.topic] {
                unpublishable.insert(connection)
            }
        }
        ledger.record(sequence: nil, messages: messages, keeping: nil, incomplete: connectionFailed)
        let events = waiting
        waiting = []
        for relayed in events {
            if connectionFailed {
                waiting.append(relayed)
            } else {
                notes += publish(relayed, retainedToo: false, publisher)
            }
        }
        return (notes, publications.count, unshown.count)
    }

    /// A PUBACK arrived for message `id`; `error` when the broker refused the publication.
    mutating func confirmed(_ id: Int32, error: MQTTError?) -> RelayNote? {
        guard ledger.confirm(id) else { return nil }
        return error.map { .refused($0) }
    }

    /// The sequence number to acknowledge to accmond now, if it grew.
    mutating func takeAcknowledgement() -> UInt64? {
        guard let released = ledger.releaseDone(), released > acknowledged else { return nil }
        acknowledged = released
        return released
    }

    /// The digest of the retained accessory topics as published (a census answer's `digest`).
    var digest: String { retainedHashes.text }

    /// The retained topic of a connection.
    func topic(of accessory: Accessory) -> String {
        topics.accessory(host: host, accessoryID: accessory.accessoryID, connectionID: accessory.connectionID.rawValue)
    }

    /// The retained payload of a connected accessory: the protocol's accessory object, as accmond writes it.
    static func payload(of accessory: Accessory) -> [UInt8] {
        JSONOutput.bytes(startingOnTheStack: 1024) { EventLineWriter.accessory(accessory, into: &$0) }
    }

    private mutating func publish(
        _ relayed: RelayedEvent, retainedToo: Bool, _ publisher: any MessagePublisher
    ) -> [RelayNote] {
        var notes: [RelayNote] = []
        var messages: [Int32] = []
        if retainedToo {
            let accessory = relayed.event.accessory
            let connect = relayed.event.change == .connect
            let sent = send(
                topic(of: accessory), connect ? Self.payload(of: accessory) : [], retained: true, publisher,
                into: &messages, notes: &notes)
            if connect, !sent { unpublishable.insert(accessory.connectionID) }
        }
        if !connectionFailed {
            send(topics.events(host: host), relayed.line, retained: false, publisher, into: &messages, notes: &notes)
        }
        ledger.record(
            sequence: relayed.event.sequence, messages: messages, keeping: relayed, incomplete: connectionFailed)
        return notes
    }

    /// Publishes one message, adding its id to `messages`; a message MQTT cannot carry is skipped with a note (and
    /// false returned), and a failed connection marks the relay until the next synchronization.
    @discardableResult
    private mutating func send(
        _ topic: String, _ payload: [UInt8], retained: Bool, _ publisher: any MessagePublisher,
        into messages: inout [Int32], notes: inout [RelayNote]
    ) -> Bool {
        if retained, !payload.isEmpty, !published.contains(topic) { journal?(topic) }
        do {
            messages.append(try publisher.publish(topic: topic, payload: payload, retained: retained))
            if retained { retainedHashes.set(topic, payload) }
            if retained, payload.isEmpty {
                published.remove(topic)
            } else if retained {
                published.insert(topic)
            }
        } catch  where error.code == .invalidMessage {
            notes.append(.skipped(topic: topic, error))
            return false
        } catch {
            connectionFailed = true
        }
        return true
    }
}
