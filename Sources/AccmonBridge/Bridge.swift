public import AccmonLogging
import AccmonMQTT
import AccmonProtocol
public import AccmonSys
import Glibc

/// Who is publishing: the machine and this run of the bridge.
public struct BridgeIdentity: Sendable, Hashable {
    /// The machine's id, from `/etc/machine-id`.
    public var machineID: String
    /// A random id of this run.
    public var runID: String
    /// When this run started, in seconds since the epoch.
    public var startedAt: Double

    public init(machineID: String, runID: String, startedAt: Double) {
        self.machineID = machineID
        self.runID = runID
        self.startedAt = startedAt
    }

    /// This run's identity, with the machine id read from `machineIDFile`; `unknown` (and a warning) when it cannot be
    /// read.
    public static func current(machineIDFile: String) -> (identity: BridgeIdentity, warning: String?) {
        let runID = (0..<2).map { _ in String(UInt64.random(in: 0...UInt64.max), radix: 16) }
            .map { String(repeating: "0", count: 16 - $0.count) + $0 }.joined()
        var machineID = "unknown"
        var warning: String?
        do {
            let bytes = try AtomicFile.read(machineIDFile) ?? []
            let line = String(decoding: bytes.prefix { $0 != UInt8(ascii: "\n") }, as: UTF8.self)
            if line.isEmpty { warning = "machine id: '\(machineIDFile)' is empty or missing" } else { machineID = line }
        } catch {
            warning = "machine id: \(error)"
        }
        return (BridgeIdentity(machineID: machineID, runID: runID, startedAt: wallClockSeconds()), warning)
    }
}

/// The bridge: one loop on one thread over accmond's socket and the broker's, until SIGTERM or SIGINT.
///
/// Events flow from ``AccmondLink`` through ``EventRelay`` to ``BrokerLink``; PUBACKs flow back and release
/// acknowledgements to accmond. While the broker is not ready, accmond is asked to suspend the session, so it queues
/// and coalesces the events; the bridge also stops reading accmond when too much is in flight.
public final class Bridge {
    /// Events received and not yet confirmed by the broker above which the bridge stops reading accmond: room for a
    /// burst of 20,000 events without being suspended (docs/MQTT.md §9).
    static let maximumBacklog = 16384

    private let configuration: BridgeConfiguration
    private let logger: Logger
    private let accmond: AccmondLink
    private let broker: BrokerLink
    private var relay: EventRelay
    private var refusedPublications = 0
    /// What the claim gateway answers a census with (``CensusBoard``), and what it was last told.
    private let census: CensusBoard
    private var censusShown = CensusBoard.Entry()
    /// Where the topics the bridge published are kept across runs (``PublishedTopicsFile``), and what was saved last.
    private var publishedFile: PublishedTopicsFile?
    private var savedPublished: Set<String> = []
    private var lastSave: UInt64 = 0
    /// Whether the last append to the journal failed (said once until one succeeds).
    private var journalFailed = false

    public init(configuration: BridgeConfiguration, identity: BridgeIdentity, census: CensusBoard, logger: Logger) {
        self.census = census
        self.configuration = configuration
        self.logger = logger
        let host = configuration.host
        accmond = AccmondLink(
            socketPath: Self.socketPath(configuration.socketPath), restoreID: configuration.restoreID, logger: logger)
        let online = HostStatus(
            state: .online, host: host, machineID: identity.machineID, runID: identity.runID,
            since: identity.startedAt, bridge: AccmonVersion.current, lease: configuration.statusLeaseSeconds)
        broker = BrokerLink(
            settings: configuration.broker, topics: configuration.topics, host: host,
            clientID: "accmon-mqtt-\(host)-\(identity.machineID.prefix(8))", online: online, logger: logger)
        relay = EventRelay(topics: configuration.topics, host: host)
    }

    /// accmond's socket: the configured one, else `$ACCMON_SOCKET`, else the default (as every client).
    static func socketPath(_ configured: String?) -> String {
        if let configured { return configured }
        if let environment = environmentValue(WireFormat.socketEnvironmentVariable), !environment.isEmpty {
            return environment
        }
        return WireFormat.defaultSocketPath
    }

    /// Runs until SIGTERM or SIGINT, then stops cleanly: waits up to 2 s for the broker's last PUBACKs, acknowledges
    /// them, publishes the offline status and disconnects. The signals must be blocked in every thread first
    /// (``SignalDescriptor/block(_:)``).
    public func run() throws(Errno) {
        let signals = try SignalDescriptor([SIGTERM, SIGINT])
        let brokers = configuration.broker.addresses.map(\.description).joined(separator: ", ")
        logger.notice(
            .started,
            "started: host '\(configuration.host)', broker \(brokers), accmond "
                + "\(accmond.socketPath), prefix '\(configuration.topics.prefix)'")
        loadPublished()
        var stopBegan: UInt64?
        var brokerStopped = false
        while true {
            let now = monotonicNanoseconds()
            if stopBegan == nil { accmond.tick(now: now) }
            handle(broker.tick(now: now), now: now)
            if let began = stopBegan {
                if !brokerStopped, relay.backlog == 0 || !broker.isReady || now - began > nanoseconds(2) {
                    releaseAcknowledgements()
                    accmond.flush(now: now)
                    broker.stop(now: now)
                    brokerStopped = true
                }
                if broker.hasStopped {
                    savePublished(now: now, force: true)
                    accmond.close()
                    logger.notice(.stopped, "stopped")
                    return
                }
            }
            var waits = [pollfd(fd: signals.descriptor.rawValue, events: Int16(POLLIN), revents: 0)]
            let readsAccmond = stopBegan == nil && relay.backlog < Self.maximumBacklog
            let accmondSocket = accmond.descriptor
            if let accmondSocket {
                let events = (readsAccmond ? POLLIN : 0) | (accmond.wantsWrite ? POLLOUT : 0)
                waits.append(pollfd(fd: accmondSocket.rawValue, events: Int16(events), revents: 0))
            }
            let brokerSocket = broker.client?.socket
            if let brokerSocket, let client = broker.client {
                waits.append(
                    pollfd(
                        fd: brokerSocket.rawValue, events: Int16(POLLIN | (client.wantsWrite ? POLLOUT : 0)),
                        revents: 0))
            }
            let deadline = [accmond.nextDeadline, broker.nextDeadline].compactMap { $0 }.min()
            let timeout = deadline.map { $0 <= now ? 0 : Int32(min(($0 - now) / 1_000_000 + 1, 1000)) } ?? 1000
            if poll(&waits, nfds_t(waits.count), timeout) < 0 {
                guard errno == EINTR else { throw Errno.current }
                continue
            }
            let after = monotonicNanoseconds()
            if waits[0].revents != 0, let signal = signals.next(), stopBegan == nil {
                logger.notice(.stopping, "received \(signal == SIGTERM ? "SIGTERM" : "SIGINT"): stopping")
                stopBegan = after
            }
            var index = 1
            if accmondSocket != nil {
                let revents = Int32(waits[index].revents)
                index += 1
                if revents & (POLLIN | POLLHUP | POLLERR) != 0 { handle(accmond.read(now: after), now: after) }
                if revents & POLLOUT != 0 { accmond.flush(now: after) }
            }
            if brokerSocket != nil {
                let revents = Int32(waits[index].revents)
                handle(
                    broker.handle(
                        readable: revents & (POLLIN | POLLHUP | POLLERR) != 0, writable: revents & POLLOUT != 0,
                        now: after), now: after)
            }
            releaseAcknowledgements()
            savePublished(now: after, force: false)
            // After this turn's publications: the status counts what they leave in the broker.
            broker.publishCount(relay.retainedCount, now: after)
            updateCensus()
            if stopBegan == nil { accmond.setSuspended(!broker.isReady) }
            if accmond.wantsWrite { accmond.flush(now: after) }
        }
    }

    /// Tells the census board what a census is answered with now: the status and count once synchronized.
    private func updateCensus() {
        let entry = CensusBoard.Entry(
            status: broker.isReady ? broker.status : nil, accessories: relay.retainedCount,
            digest: relay.digest)
        guard entry != censusShown else { return }
        censusShown = entry
        census.set(entry)
    }

    /// Reads the topics earlier runs published, from the state directory.
    private func loadPublished() {
        guard let path = configuration.stateDirectory else { return }
        do {
            var file = try PublishedTopicsFile.open(path)
            savedPublished = try file.read()
            publishedFile = file
            relay.adopt(savedPublished)
            relay.journal = { [unowned self] topic in self.journal(topic) }
        } catch {
            logger.warning(
                .bridgeReconciliation,
                "state directory '\(path)': \(error): the topics earlier runs published are not known (a ghost "
                    + "on a broker node that does not show them to this bridge stays)")
        }
    }

    /// Appends a topic to the journal before its first publication.
    private func journal(_ topic: String) {
        do {
            try publishedFile?.append(topic)
            journalFailed = false
        } catch {
            if !journalFailed {
                logger.warning(
                    .bridgeReconciliation,
                    "cannot append to the journal of published topics: \(error): a topic published before a crash "
                        + "may be left on a broker node that does not show it to this bridge")
            }
            journalFailed = true
        }
    }

    /// Writes the whole set of topics published, and empties the journal: when `force` (a synchronization, a stop)
    /// and either changed; otherwise once the journal holds ``PublishedTopicsFile/journalCompaction`` lines (again a
    /// second after a failure).
    private func savePublished(now: UInt64, force: Bool) {
        guard let file = publishedFile else { return }
        if force {
            guard relay.published != savedPublished || file.journalLines > 0 else { return }
        } else {
            guard file.wantsCompaction, now >= lastSave + nanoseconds(1) else { return }
        }
        lastSave = now
        do {
            try publishedFile?.write(relay.published)
            savedPublished = relay.published
        } catch {
            logger.warning(.bridgeReconciliation, "cannot save '\(file.path)': \(error)")
        }
    }

    private func releaseAcknowledgements() {
        if let sequence = relay.takeAcknowledgement() { accmond.acknowledge(sequence) }
    }

    private func handle(_ events: [AccmondLink.Event], now: UInt64) {
        for event in events {
            switch event {
            case .session(let accessories, let restored):
                relay.beginSession(accessories)
                logger.info(
                    .bridgeAccmond,
                    "accmond: \(restored ? "restored" : "subscribed"): \(accessories.count) accessories "
                        + (restored ? "known, the missed events follow" : "connected"))
                broker.start(now: now)
                broker.requestSynchronization(now: now)
            case .event(let relayed):
                logger.debug(
                    relayed.event.change == .connect ? .accessoryConnected : .accessoryDisconnected,
                    "\(relayed.event.change.rawValue) \(relayed.event.accessory.accessoryID)",
                    [
                        "accessory.connection": relayed.event.accessory.connectionID.description,
                        "event.seq": String(relayed.event.sequence),
                    ])
                log(relay.receive(relayed, publisher: broker.publisher))
            }
        }
    }

    private func handle(_ outcomes: [BrokerLink.Outcome], now: UInt64) {
        for outcome in outcomes {
            switch outcome {
            case .synchronized(let retained):
                guard let publisher = broker.publisher else { continue }
                let (notes, corrected, unshown) = relay.synchronized(retained: retained, publisher: publisher)
                log(notes)
                if unshown > 0 {
                    // Not clean: the broker's view and the bridge's own disagree.
                    logger.warning(
                        .bridgeReconciliation,
                        "mqtt: the broker showed \(retained.count) retained accessory topics of host "
                            + "'\(configuration.host)' but not \(unshown) that this bridge published and did not delete: "
                            + "it does not serve every retained message to this client (a cluster node? docs/MQTT.md "
                            + "§11); deleting those no longer connected, publishing the others again")
                }
                logger.info(
                    .bridgeReconciliation,
                    "mqtt: synchronized: \(retained.count) retained accessory topics read back, "
                        + "\(unshown) published and not shown, \(corrected) corrected, "
                        + "\(relay.view.count) accessories connected")
                savePublished(now: now, force: true)
            case .published(let messageID, let error):
                if let note = relay.confirmed(messageID, error: error) { log([note]) }
            case .lost:
                relay.brokerLost()
            }
        }
    }

    private func log(_ notes: [RelayNote]) {
        for note in notes {
            switch note {
            case .skipped(let topic, let error):
                logger.error(.bridgePublication, "mqtt: cannot publish to '\(topic)': \(error.message); skipped")
            case .refused(let error):
                refusedPublications += 1
                if refusedPublications <= 5 || refusedPublications % 1000 == 0 {
                    logger.error(
                        .bridgePublication,
                        "\(error.message); check the broker's ACL for this host (docs/MQTT.md) "
                            + "(\(refusedPublications) refused so far)")
                }
            }
        }
    }
}
