public import AccmonLogging
import AccmonMQTT
import AccmonProtocol
import AccmonSys
import FoundationEssentials
import Glibc

/// Claims across the fleet, on the host's side (docs/MQTT.md §12): takes the requests MQTT users publish on
/// `<prefix>/<host>/claim-requests/<user>`, forwards them to accmond as claims in the remote user's name (one line
/// for local and remote claimers: accmond decides), replies under `claim-replies/<user>/`, keeps the remote claims'
/// leases, and publishes the host's claims retained on `<prefix>/<host>/claims/<accessoryID>/<connectionID>`.
///
/// It runs on its own thread with its own broker connection and its own accmond session, beside the event path
/// (``Bridge``), which it does not touch: a claim request never waits behind a burst of events, nor the reverse.
public final class ClaimGateway {
    let configuration: BridgeConfiguration
    let logger: Logger
    let host: String
    let topics: FleetTopics
    let accmond: ClaimSessionLink
    let clientID: String
    var client: MQTTClient?
    var brokerReady = false
    /// The SUBSCRIBE of the request topics, until the broker answers it.
    var requestSubscription: Int32?
    var takingRequests = false
    var brokerRetry: UInt64 = 0
    /// What the bridge's loop says a census is answered with.
    let census: CensusBoard
    /// The census answers owed, each at a moment within its request's window.
    var censusAnswers = CensusAnswerQueue()
    var random = SystemRandomNumberGenerator()
    var brokerBackoff = Backoff(ceilingSeconds: 10)
    /// Which of the broker's addresses is tried next (docs/MQTT.md §2).
    lazy var rotation = BrokerRotation(configuration.broker.addresses)
    var leases: LeaseBook
    var nonces = NonceMemory()
    /// Requests sent to accmond, by request id, with where their answer goes.
    var pending: [Int64: Pending] = [:]
    /// The claims on the host's connections as accmond last told them; `nil` until a session told them.
    var view: [ConnectionID: (accessoryID: String, summary: ClaimSummary)]?
    /// What the broker holds under the host's claim topics, as far as the gateway knows (its own publications, and
    /// what it read back).
    var brokerClaims: [String: [UInt8]] = [:]

    enum Pending {
        case claim(Requester)
        case release(Requester, claimID: String)
        /// A release the gateway made itself: a lease expired.
        case leaseRelease(claimID: String)
        /// Taking a claim up with its token after accmond restarted.
        case resume(claimID: String)
        /// The list of claims after a session began, to find the remote claims the gateway has no lease of.
        case adopt
    }

    /// Who asked, and where the reply goes.
    struct Requester {
        var user: String
        var nonce: String
        var replyTopic: String
        var correlation: [UInt8]?
    }

    public init(configuration: BridgeConfiguration, identity: BridgeIdentity, census: CensusBoard, logger: Logger) {
        self.census = census
        self.configuration = configuration
        self.logger = logger
        host = configuration.host
        topics = configuration.topics
        accmond = ClaimSessionLink(
            socketPath: Bridge.socketPath(configuration.socketPath), restoreID: configuration.restoreID + "-claims",
            logger: logger)
        clientID = "accmon-mqtt-claims-\(configuration.host)-\(identity.machineID.prefix(8))"
        leases = LeaseBook(durationSeconds: configuration.leaseSeconds)
    }

    /// Starts the gateway's thread; it runs as long as the process.
    public func start() throws(Errno) {
        nonisolated(unsafe) let gateway = self
        try startThread(name: "claims") { gateway.run() }
    }

    func run() {
        while true {
            let now = monotonicNanoseconds()
            handle(accmond.tick(now: now), now: now)
            connectBrokerIfDue(now: now)
            handleBroker(now: now)
            expireLeases(now: now)
            var waits: [pollfd] = []
            if let socket = accmond.descriptor {
                waits.append(pollfd(fd: socket.rawValue, events: Int16(POLLIN | (accmond.wantsWrite ? POLLOUT : 0)), revents: 0))
            }
            let accmondCount = waits.count
            if let client, let socket = client.socket {
                waits.append(pollfd(fd: socket.rawValue, events: Int16(POLLIN | (client.wantsWrite ? POLLOUT : 0)), revents: 0))
            }
            let deadlines = [
                accmond.nextDeadline, leases.nextExpiry, client == nil ? brokerRetry : nil, censusAnswers.nextDue,
            ].compactMap { $0 }
            let timeout = deadlines.min().map { $0 <= now ? 0 : Int32(min(($0 - now) / 1_000_000 + 1, 1000)) } ?? 1000
            if poll(&waits, nfds_t(waits.count), timeout) < 0 { continue }
            let after = monotonicNanoseconds()
            if accmondCount == 1 {
                let revents = Int32(waits[0].revents)
                if revents & (POLLIN | POLLHUP | POLLERR) != 0 { handle(accmond.read(now: after), now: after) }
            }
            if accmond.wantsWrite { handle(accmond.flush(now: after), now: after) }
            if let client, waits.count > accmondCount {
                let revents = Int32(waits[accmondCount].revents)
                if revents & (POLLIN | POLLHUP | POLLERR) != 0 {
                    client.read()
                    // A reply follows each request at once: no delayed acknowledgement holding it (MQTTClient).
                    client.acknowledgeQuickly()
                }
                if revents & POLLOUT != 0 { client.write() }
            }
            sendCensusAnswers(now: after)
            client?.housekeeping()
            if client?.wantsWrite == true { client?.write() }
        }
    }

    // MARK: The broker

    private func connectBrokerIfDue(now: UInt64) {
        guard client == nil, now >= brokerRetry else { return }
        do {
            let settings = configuration.broker.connecting(to: rotation.current)
            let made = try MQTTClient(clientID: clientID, settings: settings)
            try made.connect(address: settings.address, keepAliveSeconds: settings.keepAliveSeconds)
            client = made
        } catch {
            brokerFailed(error, now: now)
        }
    }

    /// Owes a reader's census request an answer on its response topic (only a reader's census topic), at a moment
    /// taken at random within the request's window; a request naming another host is not this bridge's to answer.
    private func oweCensusAnswer(_ payload: [UInt8], _ properties: MQTTMessageProperties, now: UInt64) {
        guard let responseTopic = properties.responseTopic, topics.isCensusAnswerTopic(responseTopic) else { return }
        let request = Census.Request.decode(payload)
        guard request.isAnswered(by: host) else { return }
        censusAnswers.owe(
            responseTopic: responseTopic, correlation: properties.correlationData,
            due: now + request.answerDelay(using: &random))
    }

    /// Sends the census answers due, once the bridge is synchronized with the broker: the host, its count of retained
    /// accessory topics, their digest and its status, as they are when sent.
    private func sendCensusAnswers(now: UInt64) {
        let due = censusAnswers.takeDue(now: now)
        guard let client, !due.isEmpty, let answer = census.answer(host: host) else { return }
        for owed in due {
            // try?: a census answer lost is a host the reader finds in the retained store, or not at all this time.
            _ = try? client.publish(
                topic: owed.responseTopic, payload: answer.payload, retained: false, qos: 0,
                properties: MQTTMessageProperties(correlationData: owed.correlation))
        }
    }

    /// The broker connection ended or failed. Its cause is the event path's to log (the same broker, the same
    /// settings); the gateway says only what it means for claims, in words of its own, so that each log line names
    /// one part.
    private func brokerFailed(_ error: MQTTError?, now: UInt64) {
        client = nil
        if brokerReady {
            logger.warning(.bridgeBroker, "claims: away from the broker: the leases' clocks stop until it is back")
        }
        brokerReady = false
        takingRequests = false
        // Another address of the broker that has not failed since the last connection: at once.
        let delay = rotation.failed() ? 0 : brokerBackoff.failed()
        brokerRetry = now + nanoseconds(delay)
        logger.debug(
            .bridgeBroker, "claims: no broker (\(error?.code.rawValue ?? "disconnected")); next attempt in \(delay) s")
    }

    private func handleBroker(now: UInt64) {
        guard let client else { return }
        for event in client.takeEvents() {
            switch event {
            case .connected(nil):
                brokerBackoff.succeeded()
                rotation.connected()
                brokerReady = true
                brokerClaims = [:]
                // The claimers could not renew while the broker was away: a fresh full expiry for every lease.
                leases.refreshAll(now: now)
                takingRequests = false
                requestSubscription = try? client.subscribe(
                    [topics.claimRequests(host: host)], options: [.noRetained, .retainAsPublished])
                _ = try? client.subscribe([topics.claims(host: host)], options: [.noLocal])
                // Readers' census requests (docs/MQTT.md §5): an ACL that refuses them leaves the host to the
                // retained store.
                _ = try? client.subscribe([topics.censusRequests], options: [.noRetained])
                logger.info(.bridgeBroker, "claims: connected to the broker")
                announceIfReady()
                reconcile()
            case .connected(let error?):
                brokerFailed(error, now: now)
                return
            case .disconnected(let error):
                brokerFailed(error, now: now)
                return
            case .message(let topic, let payload, _, let properties) where topics.isCensusRequest(topic):
                oweCensusAnswer(payload, properties, now: now)
            case .message(let topic, let payload, let retained, let properties):
                if let user = topics.claimRequester(topic, host: host) {
                    request(from: user, payload: payload, retained: retained, properties: properties, now: now)
                } else if topics.parseClaim(topic) != nil {
                    // Someone else's edit, or what an earlier run left: the truth overwrites it.
                    if payload.isEmpty { brokerClaims.removeValue(forKey: topic) } else { brokerClaims[topic] = payload }
                    reconcile()
                }
            case .subscribed(let id, let refused) where id == requestSubscription:
                if !refused.isEmpty {
                    logger.error(
                        .bridgeBroker,
                        "claims: the broker refused the subscription to '\(topics.claimRequests(host: host))' "
                            + "(\(refused[0])): may this host's user read it? (docs/MQTT.md §12.2)")
                }
                takingRequests = refused.isEmpty
                announceIfReady()
            case .published, .subscribed, .unsubscribed:
                break
            }
        }
    }

    /// Logs, once both the broker and accmond are there, that requests are taken (what tests and admins wait for).
    func announceIfReady() {
        guard brokerReady, takingRequests, accmond.isLive else { return }
        logger.info(.bridgeBroker, "claims: taking requests on '\(topics.claimRequests(host: host))'")
    }

    /// Publishes `reply` to `topic` (QoS 1, not retained), with the request's correlation data.
    func publish(_ reply: RemoteClaimReply, to topic: String, correlation: [UInt8]?) {
        guard let client, brokerReady, let payload = try? Self.encoder.encode(reply) else { return }
        let properties = MQTTMessageProperties(correlationData: correlation)
        _ = try? client.publish(topic: topic, payload: Array(payload), retained: false, qos: 1, properties: properties)
    }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// Makes the broker's retained claim topics of the host equal to accmond's claims.
    func reconcile() {
        guard let client, brokerReady, let view else { return }
        var wanted: [String: [UInt8]] = [:]
        for (connection, entry) in view {
            let state = RemoteClaimState(
                host: host, accessoryID: entry.accessoryID, connectionID: connection.rawValue, summary: entry.summary)
            guard let payload = try? Self.encoder.encode(state) else { continue }
            wanted[topics.claim(host: host, accessoryID: entry.accessoryID, connectionID: connection.rawValue)] =
                Array(payload)
        }
        for (topic, payload) in wanted where brokerClaims[topic] != payload {
            if (try? client.publish(topic: topic, payload: payload, retained: true)) != nil { brokerClaims[topic] = payload }
        }
        for topic in brokerClaims.keys where wanted[topic] == nil {
            if (try? client.publish(topic: topic, payload: [], retained: true)) != nil {
                brokerClaims.removeValue(forKey: topic)
            }
        }
    }

    // MARK: Leases

    private func expireLeases(now: UInt64) {
        // The clocks stop while the broker is away: nobody could renew.
        guard brokerReady, takingRequests, accmond.isLive else { return }
        for lease in leases.takeExpired(now: now) {
            logger.notice(
                .bridgeAccmond,
                "claims: the lease of \(lease.claimID) of MQTT user '\(lease.user)' expired (not renewed for "
                    + "\(configuration.leaseSeconds) s): releasing it")
            let id = accmond.send(.release(ReleaseRequest(.claim(lease.claimID), remoteUser: lease.user)))
            pending[id] = .leaseRelease(claimID: lease.claimID)
            var notice = RemoteClaimReply(kind: .leaseExpired, host: host, claimID: lease.claimID)
            notice.reason = "not renewed for \(configuration.leaseSeconds) s"
            publish(notice, to: lease.replyTopic, correlation: lease.correlation)
        }
    }
}
