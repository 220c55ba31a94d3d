import AccmonSys
import Glibc

/// What a fleet watcher is told.
public enum FleetUpdate: Sendable {
    /// The whole state, read at start.
    case state(FleetState)
    /// Changes since the last update (after a reconnection: the difference from what was shown).
    case changes([FleetChange])
    /// The connection to the broker was lost or came back (for standard error).
    case connection(String)
}

/// Reads a fleet's retained state from the broker for `accmon list --broker` and `accmon watch --broker`, on a thread
/// of its own (the loop blocks in `poll`).
///
/// MQTT has no end-of-retained marker: the reader publishes a token to its own topic,
/// `<prefix>/$readers/<client id>`, and takes what arrives before the token comes back as the retained state. It reads
/// the hosts' statuses first, then each host's accessory topics in turn, so that the broker never has to queue more
/// than one host's retained messages at once (mosquitto drops messages for a client beyond `max_queued_messages`).
/// A host appears once its bridge has published a status.
public enum FleetReader {
    /// The fleet's state now.
    ///
    /// - Throws: ``MQTTError`` when the broker cannot be reached, refuses the credentials or the reads, or does not
    ///   echo the end marker.
    public static func state(settings: BrokerSettings, topics: FleetTopics) async throws(MQTTError) -> FleetState {
        let result = await onThread { FleetSession(settings: settings, topics: topics).readOnce() }
        return try result.get()
    }

    /// Hands `update` the state, then every change, until the process ends; reconnects by itself after the first
    /// read.
    ///
    /// - Throws: ``MQTTError`` when the first read fails; never returns otherwise.
    public static func watch(
        settings: BrokerSettings, topics: FleetTopics, update: @escaping @Sendable (FleetUpdate) -> Void
    ) async throws(MQTTError) {
        let failure: MQTTError = await onThread {
            FleetSession(settings: settings, topics: topics).follow(update)
        }
        throw failure
    }

    private static func onThread<Result: Sendable>(_ body: @escaping @Sendable () -> Result) async -> Result {
        await withCheckedContinuation { continuation in
            do {
                try startThread(name: "accmon-fleet") { continuation.resume(returning: body()) }
            } catch {
                // Only when the process is out of threads.
                preconditionFailure("accmon: cannot start a thread: \(error)")
            }
        }
    }
}

/// One reader's connection and state; lives on one thread.
final class FleetSession {
    private let settings: BrokerSettings
    private let topics: FleetTopics
    private let clientID = "accmon-cli-\(getpid())-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
    private var client: MQTTClient?
    private var state: FleetState
    /// Host levels whose accessory topics are subscribed.
    private var subscribedHosts: Set<String> = []
    private var failure: MQTTError?
    private var connected = false
    private var awaitedSubscription: Int32?
    private var marker: (messageID: Int32, token: [UInt8])?
    private var markerArrived = false
    private var changes: [FleetChange] = []
    /// Whether the first full read is done: from then on, a host that appears has its accessories subscribed at once.
    private var following = false

    init(settings: BrokerSettings, topics: FleetTopics) {
        self.settings = settings
        self.topics = topics
        state = FleetState(topics: topics)
    }

    func readOnce() -> Result<FleetState, MQTTError> {
        defer { client?.disconnect() }
        do {
            try synchronize()
            return .success(state)
        } catch {
            return .failure(error)
        }
    }

    /// Reads, hands over the state, then follows changes and reconnects; returns only when the first read fails.
    func follow(_ update: @Sendable (FleetUpdate) -> Void) -> MQTTError {
        do {
            try synchronize()
        } catch {
            return error
        }
        update(.state(state))
        var delay = 0.1
        while true {
            do {
                try run(until: .max) { !changes.isEmpty }
                update(.changes(changes))
                changes = []
                continue
            } catch {
                update(.connection("accmon: \(error.message); reconnecting in \(delay) s"))
            }
            usleep(useconds_t(delay * 1e6))
            delay = min(delay * 2, 10)
            let shown = state
            do {
                try synchronize()
                delay = 0.1
                update(.connection("accmon: connected to \(settings.address)"))
                update(.changes(shown.changes(to: state)))
            } catch {
                state = shown
            }
        }
    }

    /// A fresh connection and a full read: statuses, then each host's accessories.
    private func synchronize() throws(MQTTError) {
        client = nil
        connected = false
        following = false
        state = FleetState(topics: topics)
        subscribedHosts = []
        changes = []
        let client = try MQTTClient(clientID: clientID, settings: settings)
        self.client = client
        try client.connect(address: settings.address, keepAliveSeconds: settings.keepAliveSeconds)
        try run(until: deadline()) { connected }
        try subscribe([topics.statuses, topics.readerSync(clientID: clientID)])
        try awaitMarker()
        while let level = state.hosts.keys.sorted().first(where: { !subscribedHosts.contains($0) }) {
            subscribedHosts.insert(level)
            try subscribe([topics.accessories(hostLevel: level)])
            try awaitMarker()
        }
        changes = []
        following = true
    }

    private func subscribe(_ filters: [String]) throws(MQTTError) {
        guard let client else { throw MQTTError(.unreachable, "mqtt: not connected") }
        awaitedSubscription = try client.subscribe(filters)
        try run(until: deadline()) { awaitedSubscription == nil }
    }

    private func awaitMarker() throws(MQTTError) {
        guard let client else { throw MQTTError(.unreachable, "mqtt: not connected") }
        let token = Array(String(UInt64.random(in: 0...UInt64.max), radix: 16).utf8)
        let topic = topics.readerSync(clientID: clientID)
        marker = (try client.publish(topic: topic, payload: token, retained: false), token)
        markerArrived = false
        try run(until: deadline()) { markerArrived }
    }

    private func deadline() -> UInt64 { monotonicNanoseconds() + 10_000_000_000 }

    /// Drives the connection until `done` holds; throws when it fails or `deadline` passes.
    private func run(until deadline: UInt64, _ done: () -> Bool) throws(MQTTError) {
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
            guard now < deadline else {
                self.client = nil
                throw MQTTError(.unreachable, "mqtt: \(settings.address): no answer within 10 s")
            }
            var wait = pollfd(
                fd: socket.rawValue, events: Int16(POLLIN | (client.wantsWrite ? POLLOUT : 0)), revents: 0)
            let timeout = Int32(min((deadline - now) / 1_000_000 + 1, 1000))
            if poll(&wait, 1, timeout) < 0, errno != EINTR { throw MQTTError(.unreachable, "poll: \(Errno.current)") }
            if wait.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 { client.read() }
            if wait.revents & Int16(POLLOUT) != 0 { client.write() }
            client.housekeeping()
            for event in client.takeEvents() { handle(event) }
        }
    }

    private func handle(_ event: MQTTClient.Event) {
        switch event {
        case .connected(nil): connected = true
        case .connected(let error?): failure = failure ?? error
        case .disconnected(let error):
            failure = failure ?? error ?? MQTTError(.unreachable, "mqtt: \(settings.address): disconnected")
        case .subscribed(let messageID, let refused):
            if messageID == awaitedSubscription { awaitedSubscription = nil }
            if !refused.isEmpty {
                failure =
                    failure
                    ?? MQTTError(
                        .notAuthorized,
                        "mqtt: \(settings.address): the broker refused a subscription under '\(topics.prefix)/': may "
                            + "this user read the fleet's topics? (docs/MQTT.md, ACL)")
            }
        case .published(let messageID, let error?) where messageID == marker?.messageID:
            failure =
                failure
                ?? MQTTError(
                    error.code,
                    "mqtt: \(settings.address): the broker refused the end marker on "
                        + "'\(topics.readerSync(clientID: clientID))' (\(error.message)): readers must be allowed to "
                        + "publish there (docs/MQTT.md, ACL)")
        case .published:
            break
        case .message(let topic, let payload, _):
            if topic == topics.readerSync(clientID: clientID) {
                if payload == marker?.token { markerArrived = true }
                return
            }
            changes += state.apply(topic: topic, payload: payload)
            // A host that appears while following: read its accessories too (they arrive as changes).
            if following, let level = state.hosts.keys.first(where: { !subscribedHosts.contains($0) }), let client {
                subscribedHosts.insert(level)
                // try?: a failure ends the connection, which its event reports.
                _ = try? client.subscribe([topics.accessories(hostLevel: level)])
            }
        }
    }
}
