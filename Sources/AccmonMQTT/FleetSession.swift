import AccmonSys
import Glibc

/// One read: filters subscribed at once (or none: a marker alone, which closes an interval while following), read
/// until the end marker comes back.
struct FleetWindow {
    enum Kind {
        /// Every host's status.
        case statuses
        /// Buckets of the host index.
        case index([Int])
        /// Whole hosts: their statuses, accessory and claim topics.
        case hosts([FleetReadPlan.Host])
        /// The claim topics of hosts whose window may have lost some (FleetSession+Claims.swift).
        case claimCheck([String])
        /// The statuses of hosts shown, to compare their counts with what is shown (following, after an interval in
        /// which the broker may have dropped a change).
        case statusCheck([String])
        /// No filter: an end marker after changes, whose return tells whether the broker can have dropped some.
        case live
    }

    var kind: Kind
    var filters: [String]
    /// Whether the filters stay subscribed once read (to follow changes).
    var keep: Bool
    var number: Int
    /// The message id of its SUBSCRIBE, and whether the SUBACK came.
    var subscribeID: Int32?
    var subscribed = false
    /// The packets received since the SUBSCRIBE was sent.
    var packets = 0
    /// For a window bigger than the broker's queue: the packets after which its first end marker goes (sent at once,
    /// the broker would drop it while its queue is full of the window's messages).
    var markerAfter: Int?
    var markersSent = 0
    var lastPacket: UInt64
    /// Which of the end markers came back first (0: the first one, so no marker was dropped).
    var endedWith: Int?
    /// What the read found of its hosts, kept apart from what is shown until the end.
    var fresh: FleetState
    var levels: Set<String> = []
    /// The host levels of the index entries read for the selection (`.index`), and how many entries were read.
    var entries: Set<String> = []
    var entriesRead = 0
    /// Whether its hosts' accessory payloads are kept undecoded, for the session's ``AccessoryDecoder``.
    var holdsPayloads = false
    /// Those payloads, one after the other, and where each lies, by host level and connection id.
    var payloadBytes: [UInt8] = []
    var payloads: [String: [UInt64: Range<Int>]] = [:]
}

/// One reader's connection and state; lives on one thread. The reads are in FleetSession+Reads.swift, what following
/// adds in FleetSession+Following.swift.
final class FleetSession {
    enum Phase { case connecting, statuses, index, hosts, following }

    /// Packets a window may hold that the reader does not count (PINGRESP).
    static let uncountedPackets = 8
    /// Without a packet for this long, a window whose end marker may have been dropped sends another one.
    static let markerRetryAfterDrop: UInt64 = 200_000_000
    static let markerRetry: UInt64 = 1_000_000_000
    static let answerTimeout: UInt64 = 10_000_000_000

    /// The settings of the address connected to (or tried next): one of the broker's, by ``rotation``.
    var settings: BrokerSettings
    var rotation: BrokerRotation
    let topics: FleetTopics
    let options: FleetReadOptions
    /// Whether the session follows changes after its first read (`watch`), so keeps what it subscribed to.
    let follows: Bool
    let clientID = "accmon-cli-\(getpid())-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
    /// The topic of this reader's end markers (compared with every message's).
    let markerTopic: String
    /// Tells this session's end markers from an earlier one's with the same client id.
    let nonce = String(UInt64.random(in: 0...UInt64.max), radix: 16)
    var client: MQTTClient?
    var state: FleetState
    var plan: FleetReadPlan
    var phase = Phase.connecting
    /// The oldest window open, and the next one when it started before the oldest ended (`list`: FleetSession+Reads).
    var window: FleetWindow?
    var ahead: FleetWindow?
    var windowNumber = 0
    /// The last window finished, and whether nothing can have been dropped in it.
    var finished: (window: FleetWindow, complete: Bool)?
    /// The broker's queue as the reader knows it: the option, or less once a dropped end marker showed it smaller.
    var brokerQueue: Int
    /// The host levels known to read (read, or waiting in the plan).
    var listed: Set<String> = []
    /// The host levels the host index lists: shown, as `unknown`, even when the broker holds nothing else of them.
    var indexed: Set<String> = []
    var changes: [FleetChange] = []
    var warnings: [String] = []
    /// Whether a warning said that something may be missing (rather than read slower).
    var incomplete = false
    /// Filters to unsubscribe from with the next SUBSCRIBE.
    var pendingUnsubscribe: [String] = []
    /// What following keeps: the intervals between end markers, the hosts to read again.
    var watching = Watching()
    /// When the packets being handled arrived: the clock read once for each batch `poll` announced, not per packet.
    var packetTime: UInt64 = 0
    /// Hosts whose claim topics are to be read again, and the most hosts one such read may hold.
    var claimChecks: [String] = []
    var claimCheckCap = Int.max
    /// A one-time read's hosts decoded while the next ones are read (FleetSession+Decoding.swift).
    var decoding: Decoding?
    /// Given each host of a one-time read once it is read (``FleetReader/state(settings:topics:options:eachHost:)``).
    let eachHost: (@Sendable (FleetHost) -> Void)?
    var failure: MQTTError?
    var connected = false
    /// Whether the broker ended a connection it had accepted (rather than refusing or not answering).
    var lostConnection = false
    var awaitedSubscription: Int32?
    var stepDeadline: UInt64?
    var probeToken: [UInt8]?
    var probeMessageID: Int32?
    /// This read's census, once its request went out, and its SUBSCRIBE until answered (FleetSession+Census.swift).
    var census: CensusRead?
    var censusSubscription: Int32?

    init(
        settings: BrokerSettings, topics: FleetTopics, options: FleetReadOptions, follows: Bool,
        eachHost: (@Sendable (FleetHost) -> Void)? = nil
    ) {
        self.settings = settings
        rotation = BrokerRotation(settings.addresses)
        self.eachHost = eachHost
        self.topics = topics
        self.options = options
        self.follows = follows
        markerTopic = topics.readerSync(clientID: clientID)
        state = FleetState(topics: topics)
        brokerQueue = options.brokerQueue
        plan = FleetReadPlan(budget: Self.budget(brokerQueue))
    }

    /// The messages a window may expect: half the broker's queue, less the packets not counted and a tenth for the
    /// changes that arrive meanwhile. Half, so that two windows in a row fit the queue: `list` starts a window before
    /// the one before it ends (FleetSession+Reads.swift), and while following a drop shows in two consecutive
    /// intervals (FleetSession+Following.swift).
    static func budget(_ brokerQueue: Int) -> Int { (brokerQueue - uncountedPackets) * 9 / 20 }

    var budget: Int { Self.budget(brokerQueue) }

    /// Reads the fleet once. A broker that ends the connection in the middle of the read (ejabberd ends that of a
    /// reader that falls behind, instead of dropping messages for it) has it read again from the start, at most
    /// ``readAttempts`` times in all, 0.2 s then twice as long apart; a warning says so.
    func readOnce() -> Result<FleetReadResult, MQTTError> {
        defer { client?.disconnect() }
        var notes: [String] = []
        var delay = 0.2
        var attempt = 0
        while true {
            attempt += 1
            do {
                try synchronize()
                // A lease that ran out while the rest was read: that host is stale, not online.
                for level in state.leasesRunOut(now: monotonicNanoseconds()) { _ = state.markStale(level: level) }
                return .success(FleetReadResult(state: state, warnings: notes + warnings, complete: !incomplete))
            } catch {
                // The hosts handed over so far are handed over again by the next read, after these.
                _ = decoding?.decoder.finish()
                decoding = nil
                guard lostConnection, attempt < Self.readAttempts else { return .failure(error) }
                if rotation.addresses.count > 1 {
                    // Another node or listener of the broker, at once.
                    rotation.advance()
                    notes.append("accmon: \(error.message); reading again through \(rotation.current)")
                } else {
                    notes.append("accmon: \(error.message); reading again in \(delay) s")
                    usleep(useconds_t(delay * 1e6))
                    delay *= 2
                }
            }
        }
    }

    /// How many times a one-time read is tried when the broker ends its connection in the middle of it.
    static let readAttempts = 4

    /// A fresh connection to the broker's current address, else to each next one in turn (docs/MQTT.md §2); throws
    /// the last address's failure when none connects.
    func connect() throws(MQTTError) {
        var tried = 0
        while true {
            settings = settings.connecting(to: rotation.current)
            do {
                try connectOnce()
                return
            } catch {
                tried += 1
                guard tried < rotation.addresses.count else { throw error }
                rotation.advance()
            }
        }
    }

    /// A fresh connection to ``settings``'s address: connected, the end-marker topic subscribed and the end marker
    /// echoed once (a QoS 1 publication, whose PUBACK tells a refusal by the ACL).
    private func connectOnce() throws(MQTTError) {
        client = nil
        census = nil
        connected = false
        lostConnection = false
        failure = nil
        window = nil
        ahead = nil
        phase = .connecting
        pendingUnsubscribe = []
        watching = Watching()
        claimChecks = []
        claimCheckCap = Int.max
        brokerQueue = options.brokerQueue
        plan = FleetReadPlan(budget: budget)
        let client = try MQTTClient(clientID: clientID, settings: settings)
        if decoding != nil { client.takeMessage = { [unowned self] in take(topic: $0, payload: $1) } }
        self.client = client
        try client.connect(address: settings.address, keepAliveSeconds: settings.keepAliveSeconds)
        try waitFor { connected }
        try subscribe([markerTopic])
        let token = Array("\(nonce) probe".utf8)
        probeToken = token
        probeMessageID = try client.publish(
            topic: markerTopic, payload: token, retained: false)
        try waitFor { probeToken == nil }
    }

    /// Subscribes and waits for the SUBACK.
    func subscribe(_ filters: [String], options: MQTTClient.SubscriptionOptions = []) throws(MQTTError) {
        guard let client else { throw MQTTError(.unreachable, "mqtt: not connected") }
        awaitedSubscription = try client.subscribe(filters, options: options)
        try waitFor { awaitedSubscription == nil }
    }

    /// Drives the connection until `done` holds, at most 10 s.
    private func waitFor(_ done: () -> Bool) throws(MQTTError) {
        stepDeadline = monotonicNanoseconds() + Self.answerTimeout
        defer { stepDeadline = nil }
        try run(done)
    }

    /// Drives the connection until `done` holds; throws when it fails, or a step or a window gets no answer in time.
    func run(_ done: () -> Bool) throws(MQTTError) {
        while !done() {
            if let failure {
                self.failure = nil
                client = nil
                throw failure
            }
            guard let client, let socket = client.socket else {
                throw MQTTError(.unreachable, "mqtt: \(settings.address): the connection closed")
            }
            let now = monotonicNanoseconds()
            let wake = try advance(now: now)
            if done() { break }
            var wait = pollfd(
                fd: socket.rawValue, events: Int16(POLLIN | (client.wantsWrite ? POLLOUT : 0)), revents: 0)
            let timeout = Int32(min(wake > now ? (wake - now) / 1_000_000 + 1 : 0, 1000))
            if poll(&wait, 1, timeout) < 0, errno != EINTR { throw MQTTError(.unreachable, "poll: \(Errno.current)") }
            packetTime = monotonicNanoseconds()
            if wait.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                // Many packets per poll: libmosquitto reads one packet per call.
                for _ in 0..<256 {
                    let took = client.read()
                    let events = client.takeEvents()
                    if events.isEmpty, !took { break }
                    for event in events { handle(event) }
                    if self.client !== client { break }
                }
                client.acknowledgeQuickly()
            }
            if wait.revents & Int16(POLLOUT) != 0 { client.write() }
            client.housekeeping()
            for event in client.takeEvents() { handle(event) }
        }
    }

    /// Does what is due at `now` (timeouts, another end marker, the reads of a session that follows); returns when
    /// something is next due.
    private func advance(now: UInt64) throws(MQTTError) -> UInt64 {
        if let stepDeadline, now >= stepDeadline { throw noAnswer() }
        if phase == .following, window == nil, let due = try startFollowingRead(now: now) { return due }
        // The newest window's marker: when it comes back, an older marker that did not was dropped.
        guard var newest = ahead ?? window else { return min(now + 1_000_000_000, censusDeadline(after: now) ?? .max) }
        let idle = now - min(newest.lastPacket, now)
        if idle >= Self.answerTimeout { throw noAnswer() }
        let mayHaveDropped = newest.packets + Self.uncountedPackets >= brokerQueue
        let retry = mayHaveDropped ? Self.markerRetryAfterDrop : Self.markerRetry
        if idle >= retry {
            try sendMarker(&newest)
            newest.lastPacket = now
            if ahead != nil { ahead = newest } else { window = newest }
        }
        return now + retry
    }

    private func noAnswer() -> MQTTError {
        client = nil
        return MQTTError(.unreachable, "mqtt: \(settings.address): no answer within 10 s")
    }

    /// Publishes the window's next end marker, QoS 0: a QoS 1 one the broker drops leaves its PUBACK unsent, and
    /// libmosquitto's in-flight window would fill with them.
    func sendMarker(_ window: inout FleetWindow) throws(MQTTError) {
        guard let client else { throw MQTTError(.unreachable, "mqtt: not connected") }
        let token = Array("\(nonce) \(window.number) \(window.markersSent)".utf8)
        window.markersSent += 1
        _ = try client.publish(topic: markerTopic, payload: token, retained: false, qos: 0)
    }

    private func handle(_ event: MQTTClient.Event) {
        switch event {
        case .connected(nil): connected = true
        case .connected(let error?): failure = failure ?? error
        case .disconnected(let error):
            lostConnection = connected
            failure = failure ?? error ?? MQTTError(.unreachable, "mqtt: \(settings.address): disconnected")
        case .subscribed(let messageID, let refused):
            countPacket()
            if messageID == awaitedSubscription { awaitedSubscription = nil }
            if messageID == censusSubscription {
                if !refused.isEmpty { censusSubscription = nil }
                return
            }
            if messageID == window?.subscribeID { window?.subscribed = true }
            if messageID == ahead?.subscribeID { ahead?.subscribed = true }
            if !refused.isEmpty {
                failure =
                    failure
                    ?? MQTTError(
                        .notAuthorized,
                        "mqtt: \(settings.address): the broker refused a subscription under '\(topics.prefix)/' "
                            + "(\(refused[0])): may this user read the fleet's topics? (docs/MQTT.md, ACL)")
            }
        case .unsubscribed:
            countPacket()
        case .published(let messageID, let error?) where messageID == probeMessageID:
            failure =
                failure
                ?? MQTTError(
                    error.code,
                    "mqtt: \(settings.address): the broker refused the end marker on "
                        + "'\(markerTopic)' (\(error.message)): readers must be allowed to "
                        + "publish there (docs/MQTT.md, ACL)")
        case .published:
            break
        case .message(let topic, let payload, _, let properties):
            countPacket()
            if censusMessage(topic: topic, payload: payload, properties: properties) {
                return
            } else if topic == markerTopic {
                marker(payload)
            } else if let parsed = topics.parse(topic) {
                message(parsed, payload: payload, expiry: properties.expirySeconds)
            }
        }
    }

    /// Counts a packet received: in the window, and in the interval since the last end marker came back.
    func countPacket() {
        let now = packetTime
        watching.sinceMarker += 1
        watching.lastPacket = now
        if ahead != nil {
            ahead!.packets += 1
            ahead!.lastPacket = now
        }
        guard window != nil else { return }
        window!.packets += 1
        window!.lastPacket = now
        if window!.markersSent == 0, let after = window!.markerAfter, window!.packets >= after {
            // try?: a failed publication ends the connection, which its event reports.
            try? sendMarker(&window!)
        }
    }

    /// An end marker came back: the probe of ``connect()``, or a window's (any of its tokens ends it).
    private func marker(_ payload: [UInt8]) {
        if let probeToken, payload == probeToken {
            self.probeToken = nil
            return
        }
        guard let window else { return }
        let words = String(decoding: payload, as: UTF8.self).split(separator: " ")
        guard words.count == 3, words[0] == nonce, let number = Int(words[1]), let resend = Int(words[2]) else {
            return
        }
        if number == window.number {
            self.window?.endedWith = resend
            finishWindow()
        } else if number == ahead?.number {
            // The oldest window's markers came back before this one, or were dropped.
            self.window?.endedWith = window.markersSent
            finishWindow()
            self.window?.endedWith = resend
            finishWindow()
        }
    }
}
