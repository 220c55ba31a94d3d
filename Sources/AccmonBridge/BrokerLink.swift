import AccmonLogging
import AccmonMQTT
import AccmonSys

/// The bridge's connection to the broker: connecting with backoff, the host's status and will, its entry in the host
/// index, and the synchronization that reads the host's retained accessory topics back after every connection.
///
/// The status counts the host's retained accessory topics once they are synchronized (``publishCount(_:)``), and again
/// whenever the count changes, after the publications that change it; the will and the status published at connection
/// carry no count, since what the broker holds is not known then.
///
/// The online status is a lease (``HostStatus/lease``): published with an MQTT 5 message expiry of the lease and
/// published again every half of it while connected (any publication of it counts), so that the broker deletes it
/// when neither this bridge nor its will can speak for the host any more: a site broker killed between the bridge and
/// a central one, for one (docs/MQTT.md §11).
///
/// MQTT has no end-of-retained marker: after subscribing to its accessory topics and to its own `sync` topic, the link
/// publishes a token to `sync` and takes every accessory message that arrives before the token comes back as the
/// retained state. Then it subscribes again with no-local and without retained messages, so that from then on every
/// message on those topics is someone else's edit, which schedules a new synchronization.
final class BrokerLink {
    enum Outcome {
        /// The host's retained accessory topics were read back (topic to payload): the broker is ready.
        case synchronized(retained: [String: [UInt8]])
        /// A PUBACK.
        case published(messageID: Int32, error: MQTTError?)
        /// The connection was lost (or failed): what was in flight is unconfirmed.
        case lost
    }

    private enum Phase {
        case idle
        case waiting(until: UInt64)
        case connecting(deadline: UInt64)
        case subscribing(messageID: Int32, deadline: UInt64)
        case awaitingMarker(token: [UInt8], messageID: Int32, deadline: UInt64)
        case ready
        case stopping(statusMessageID: Int32?, deadline: UInt64)
        case stopped
    }

    /// How long a connection or a synchronization may take before it is given up and retried.
    static let stepTimeout = nanoseconds(10)
    /// How long after someone else's edit of the host's topics the synchronization that overwrites it starts.
    static let editSettling = nanoseconds(1)

    private let configured: BrokerSettings
    /// Which of the broker's addresses is tried next (docs/MQTT.md §2).
    private var rotation: BrokerRotation
    let topics: FleetTopics
    let host: String
    private let clientID: String
    /// This run's online status, without counts.
    let online: HostStatus
    /// The online status last published (with the count last published).
    var current: HostStatus
    let logger: Logger
    private(set) var client: MQTTClient?
    private var phase = Phase.idle
    private var retained: [String: [UInt8]] = [:]
    private var backoff = Backoff(ceilingSeconds: 10)
    private var lastFailure = ""
    private var synchronizations = 0
    private var resyncDue: UInt64?
    /// The message id of the last online status published.
    private var statusMessageID: Int32?
    /// When the online status is next published again to renew its lease, while connected.
    private var renewalDue: UInt64?
    /// The message id of the host index entry published at the last connection.
    var indexMessageID: Int32?
    private var indexRefusalLogged = false

    init(
        settings: BrokerSettings, topics: FleetTopics, host: String, clientID: String, online: HostStatus,
        logger: Logger
    ) {
        configured = settings
        rotation = BrokerRotation(settings.addresses)
        self.topics = topics
        self.host = host
        self.clientID = clientID
        self.online = online
        current = online
        self.logger = logger
    }

    /// The settings of the address connected to, or tried next.
    private var settings: BrokerSettings { configured.connecting(to: rotation.current) }

    var isReady: Bool { if case .ready = phase { true } else { false } }
    var hasStopped: Bool { if case .stopped = phase { true } else { false } }
    /// The client to publish through, while the broker is ready.
    var publisher: MQTTClient? { isReady ? client : nil }

    /// The earliest moment something is due (a retry, a timeout, a synchronization).
    var nextDeadline: UInt64? {
        switch phase {
        case .waiting(let until): until
        case .connecting(let deadline), .stopping(_, let deadline): deadline
        case .subscribing(_, let deadline), .awaitingMarker(_, _, let deadline):
            min(deadline, renewalDue ?? .max)
        case .ready: [resyncDue, renewalDue].compactMap { $0 }.min()
        case .idle, .stopped: nil
        }
    }

    /// Whether the broker accepted the connection and the bridge speaks for the host on it (its lease is renewed).
    private var isOnline: Bool {
        switch phase {
        case .subscribing, .awaitingMarker, .ready: true
        default: false
        }
    }

    /// Starts connecting, once accmond's truth is known.
    func start(now: UInt64) {
        if case .idle = phase { connect(now: now) }
    }

    /// Asks for a synchronization (accmond's truth changed as a whole); one happens at every connection anyway.
    func requestSynchronization(now: UInt64) {
        if isReady { resyncDue = now }
    }

    /// Does what is due at `now`: keep-alive, a retry, a timeout, a synchronization.
    func tick(now: UInt64) -> [Outcome] {
        client?.housekeeping()
        var outcomes = drainEvents(now: now)
        if isOnline, let renewalDue, now >= renewalDue { publishStatus(now: now) }
        switch phase {
        case .waiting(let until) where now >= until:
            connect(now: now)
        case .connecting(let deadline) where now >= deadline,
            .subscribing(_, let deadline) where now >= deadline,
            .awaitingMarker(_, _, let deadline) where now >= deadline:
            outcomes += fail(MQTTError(.unreachable, "mqtt: \(settings.address): no answer within 10 s"), now: now)
        case .ready where resyncDue.map { now >= $0 } ?? false:
            synchronize(now: now)
        case .stopping(_, let deadline) where now >= deadline:
            logger.warning(.bridgeBroker, "mqtt: the broker did not confirm the offline status in time; closing")
            client = nil
            phase = .stopped
        default:
            break
        }
        return outcomes
    }

    /// Drives the connection's socket (after a poll), then handles what happened.
    func handle(readable: Bool, writable: Bool, now: UInt64) -> [Outcome] {
        guard let client else { return [] }
        if readable { client.read() }
        if writable, self.client === client { client.write() }
        return drainEvents(now: now)
    }

    /// Handles the client's events, including those that handling them causes (a DISCONNECT written at once ends the
    /// connection inside ``MQTTClient/disconnect()``).
    private func drainEvents(now: UInt64) -> [Outcome] {
        var outcomes: [Outcome] = []
        while let client {
            let events = client.takeEvents()
            if events.isEmpty { break }
            for event in events where self.client === client { outcomes += handle(event, now: now) }
        }
        return outcomes
    }

    /// Publishes the offline status and disconnects; ``hasStopped`` once done (or after 2 s).
    func stop(now: UInt64) {
        guard let client else {
            phase = .stopped
            return
        }
        switch phase {
        case .subscribing, .awaitingMarker, .ready:
            // With the count: the accessory topics stay as last published.
            let offline = current.with(.offline, reason: "stopped")
            // try?: when it cannot be sent, the will says offline anyway.
            let messageID = try? client.publish(
                topic: topics.status(host: host), payload: offline.payload, retained: true)
            phase = .stopping(statusMessageID: messageID, deadline: now + nanoseconds(2))
            if messageID == nil { client.disconnect() }
        default:
            self.client = nil
            phase = .stopped
        }
    }

    // MARK: Steps

    private func connect(now: UInt64) {
        let will = MQTTClient.Will(
            topic: topics.status(host: host), payload: online.with(.offline, reason: "connection-lost").payload,
            retained: true)
        do {
            let client = try MQTTClient(clientID: clientID, settings: settings, will: will)
            try client.connect(address: settings.address, keepAliveSeconds: settings.keepAliveSeconds)
            self.client = client
            phase = .connecting(deadline: now + Self.stepTimeout)
        } catch {
            _ = fail(error, now: now)
        }
    }

    private func handle(_ event: MQTTClient.Event, now: UInt64) -> [Outcome] {
        switch event {
        case .connected(nil):
            logger.notice(
                .bridgeBroker, "mqtt: connected to \(settings.address) as '\(clientID)'",
                ["mqtt.host": host, "mqtt.attempts": String(backoff.failures + 1)])
            backoff.succeeded()
            rotation.connected()
            lastFailure = ""
            current = online
            publishStatus(now: now)
            publishIndexEntry()
            synchronize(now: now)
        case .connected(let error?):
            return fail(error, now: now)
        case .disconnected(let error):
            if case .stopping = phase {
                client = nil
                phase = .stopped
                return []
            }
            return fail(error ?? MQTTError(.unreachable, "mqtt: \(settings.address): disconnected"), now: now)
        case .subscribed(let messageID, let refused):
            guard case .subscribing(let expected, _) = phase, expected == messageID else { break }
            if !refused.isEmpty {
                logger.error(
                    .bridgeReconciliation,
                    "mqtt: the broker does not let host '\(host)' read its own topics back "
                        + "(\(topics.accessories(host: host)), \(topics.sync(host: host)): \(refused[0])): stale "
                        + "retained topics cannot be found and removed; grant this user read access to its subtree "
                        + "(docs/MQTT.md)")
                return finishSynchronization()
            }
            let token = Array("\(online.runID) \(synchronizations)".utf8)
            do {
                guard let client else { break }
                let messageID = try client.publish(topic: topics.sync(host: host), payload: token, retained: false)
                phase = .awaitingMarker(token: token, messageID: messageID, deadline: now + Self.stepTimeout)
            } catch {
                return fail(error, now: now)
            }
        case .published(let messageID, let error):
            if case .stopping(let statusID?, _) = phase, statusID == messageID { client?.disconnect() }
            if let error, case .awaitingMarker(_, messageID, _) = phase {
                return fail(
                    MQTTError(
                        error.code,
                        "mqtt: the broker refused the marker on '\(topics.sync(host: host))' (\(error.message)); may "
                            + "this user write under '\(topics.prefix)/\(FleetTopics.encodeLevel(host))/'? "
                            + "(docs/MQTT.md, ACL)"
                    ),
                    now: now)
            }
            if let error, messageID == statusMessageID {
                logger.error(.bridgeBroker, "mqtt: the broker refused the status of host '\(host)': \(error.message)")
            }
            if let error, messageID == indexMessageID, !indexRefusalLogged {
                indexRefusalLogged = true
                logger.warning(
                    .bridgeBroker,
                    "mqtt: the broker refused the host index entry '\(topics.indexEntry(host: host))' "
                        + "(\(error.message)): readers of a fleet of more hosts than one read delivers may miss host "
                        + "'\(host)'; let this user write it (docs/MQTT.md, ACL)")
            }
            return [.published(messageID: messageID, error: error)]
        case .message(let topic, let payload, _, _):
            return message(topic: topic, payload: payload, now: now)
        case .unsubscribed:
            break
        }
        return []
    }

    private func message(topic: String, payload: [UInt8], now: UInt64) -> [Outcome] {
        switch phase {
        case .awaitingMarker(let token, _, _) where topic == topics.sync(host: host):
            if payload == token { return finishSynchronization() }
        case .subscribing, .awaitingMarker:
            if topic != topics.sync(host: host) { retained[topic] = payload.isEmpty ? nil : payload }
        case .ready where topic == topics.status(host: host):
            checkStatus(payload, now: now)
        case .ready:
            // No-local: not ours. Overwritten with the truth by a synchronization once the edits settle.
            if resyncDue == nil {
                logger.notice(
                    .bridgeReconciliation,
                    "mqtt: another client changed '\(topic)': overwriting the host's topics with the truth")
            }
            resyncDue = min(resyncDue ?? .max, now + Self.editSettling)
        default:
            break
        }
        return []
    }

    /// Reads the retained accessory topics back: subscribes with retained messages, then waits for the marker.
    private func synchronize(now: UInt64) {
        guard let client else { return }
        retained = [:]
        resyncDue = nil
        synchronizations += 1
        do {
            // Unsubscribed first: the watch after the last synchronization has other options
            // (see finishSynchronization).
            try client.unsubscribe([topics.accessories(host: host)])
            let messageID = try client.subscribe([topics.accessories(host: host), topics.sync(host: host)])
            phase = .subscribing(messageID: messageID, deadline: now + Self.stepTimeout)
        } catch {
            _ = fail(error, now: now)
        }
    }

    private func finishSynchronization() -> [Outcome] {
        // From now on only others' messages, and no retained ones again; sent before any publication of the
        // reconciliation, so none of those comes back. Unsubscribed first, or mosquitto keeps the old options.
        do {
            try client?.unsubscribe([topics.accessories(host: host)])
            _ = try client?.subscribe(
                [topics.accessories(host: host), topics.status(host: host)], options: [.noLocal, .noRetained])
        } catch {
            logger.warning(.bridgeReconciliation, "mqtt: cannot watch the host's topics for others' edits: \(error)")
        }
        phase = .ready
        let read = retained
        retained = [:]
        return [.synchronized(retained: read)]
    }

    /// Publishes the online status, with its lease as its message expiry; the next renewal is due in half the lease.
    func publishStatus(now: UInt64) {
        let lease = current.leaseSeconds
        renewalDue = lease.map { now + UInt64($0) * 500_000_000 }
        do {
            statusMessageID = try client?.publish(
                topic: topics.status(host: host), payload: current.payload, retained: true, qos: 1,
                properties: MQTTMessageProperties(expirySeconds: lease.map(UInt32.init)))
        } catch {
            logger.error(.bridgeBroker, "mqtt: cannot publish the status of host '\(host)': \(error)")
        }
    }

    /// Publishes the online status again when the number of the host's retained accessory topics changed; only while
    /// ready (synchronized), after the publications that changed it.
    func publishCount(_ accessories: Int, now: UInt64) {
        guard isReady, current.retainedCount(.accessories) != accessories else { return }
        current.retained = [FleetTopics.RetainedFamily.accessories.rawValue: accessories]
        publishStatus(now: now)
    }

    /// Drops the connection and schedules the next attempt.
    private func fail(_ error: MQTTError, now: UInt64) -> [Outcome] {
        let wasReady = isReady
        let hadClient = client != nil
        client = nil
        let held = wasReady ? "; accmond keeps the events meanwhile" : ""
        if rotation.failed() {
            // Another address of the broker has not failed since the last connection: at once.
            phase = .waiting(until: now)
            logger.log(
                wasReady || backoff.isWorthReporting ? .warning : .debug, .bridgeBroker,
                error.message + held + "; trying \(rotation.current) at once", ["mqtt.error": error.code.rawValue])
            lastFailure = error.message
            return hadClient ? [.lost] : []
        }
        let delay = backoff.failed()
        phase = .waiting(until: now + nanoseconds(delay))
        let next = rotation.addresses.count > 1 ? " (\(rotation.current))" : ""
        let message = error.message + held + "; reconnecting in \(delay) s\(next) (attempt \(backoff.failures))"
        let level: LogLevel =
            error.code == .credentials || error.code == .tls || error.code == .notAuthorized
            ? .error : wasReady || backoff.isWorthReporting || error.message != lastFailure ? .warning : .debug
        logger.log(level, .bridgeBroker, message, ["mqtt.error": error.code.rawValue])
        lastFailure = error.message
        return hadClient ? [.lost] : []
    }
}
