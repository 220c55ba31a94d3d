import AccmonProtocol
import AccmonSys
import FoundationEssentials
import Glibc

/// A claimer's side of claims across the fleet (docs/MQTT.md §12), driven synchronously: publishes requests on
/// `<prefix>/<host>/claim-requests/<user>` (QoS 1, with a nonce, an MQTT 5 message expiry, a response topic under its
/// own replies and the nonce as correlation data) and collects the hosts' replies and notices. Used by `accmon claim
/// --broker` and the tests.
///
/// - Important: Not thread-safe: use it from one thread.
public final class RemoteClaimClient {
    public let topics: FleetTopics
    /// The MQTT user: the identity the broker's ACL gives the requests.
    public let user: String
    private let clientID: String
    private var client: MQTTClient
    private var inbox: [RemoteClaimReply] = []
    /// The retained claim topics read (``readClaims(timeout:)``).
    private var retained: [String: [UInt8]] = [:]
    private var connected = false
    /// Whether ``readRetained(_:timeout:)`` is collecting, and the token of its end marker.
    private var reading = false
    private var markerToken: [UInt8] = []
    private var markerSeen = false

    /// Connects and, with a user name, subscribes to the user's replies on every host (without one it only reads);
    /// throws when the broker refuses or does not answer within `timeout` seconds.
    /// With several addresses (a broker's nodes or listeners, docs/MQTT.md §2), each is tried in turn until one
    /// connects; the last one's failure is thrown.
    public init(settings: BrokerSettings, topics: FleetTopics, clientID: String, timeout: Double = 10) throws(MQTTError) {
        user = settings.username ?? ""
        self.topics = topics
        self.clientID = clientID
        var failure: MQTTError?
        client = try MQTTClient(clientID: clientID, settings: settings.connecting(to: settings.addresses[0]))
        for (number, address) in settings.addresses.enumerated() {
            let attempt = settings.connecting(to: address)
            do {
                if number > 0 { client = try MQTTClient(clientID: clientID, settings: attempt) }
                try handshake(attempt, timeout: timeout)
                return
            } catch {
                failure = error
            }
        }
        throw failure ?? MQTTError(.unreachable, "mqtt: no broker address")
    }

    /// Connects to `settings`' address and subscribes to the user's replies.
    private func handshake(_ settings: BrokerSettings, timeout: Double) throws(MQTTError) {
        connected = false
        try client.connect(address: settings.address, keepAliveSeconds: settings.keepAliveSeconds)
        let deadline = monotonicNanoseconds() + UInt64(timeout * 1e9)
        var subscription: Int32?
        var subscribed = false
        while !subscribed {
            guard monotonicNanoseconds() < deadline else {
                throw MQTTError(.unreachable, "mqtt: \(settings.address): no answer within \(timeout) s")
            }
            for event in try pumpEvents(milliseconds: 100) {
                switch event {
                case .connected(nil):
                    connected = true
                    if user.isEmpty {
                        subscribed = true
                    } else {
                        subscription = try client.subscribe([topics.claimReplies(user: user)])
                    }
                case .connected(let error?): throw error
                case .disconnected(let error):
                    throw error ?? MQTTError(.unreachable, "mqtt: \(settings.address): disconnected")
                case .subscribed(let id, let refused) where id == subscription:
                    guard refused.isEmpty else {
                        throw MQTTError(
                            .notAuthorized,
                            "mqtt: the broker does not let '\(user)' read '\(topics.claimReplies(user: user))' "
                                + "(\(refused[0])): docs/MQTT.md §12: the ACL")
                    }
                    subscribed = true
                default: break
                }
            }
        }
    }

    /// Publishes `request` to `host`; returns its nonce (the request's own unless it has one).
    @discardableResult
    public func send(_ request: RemoteClaimRequest, to host: String, expirySeconds: UInt32 = 30) throws(MQTTError)
        -> String
    {
        var request = request
        if request.nonce.isEmpty { request.nonce = Self.makeNonce() }
        let payload = (try? JSONEncoder().encode(request)).map { Array($0) } ?? []
        let properties = MQTTMessageProperties(
            responseTopic: topics.claimReplies(host: host, user: user) + FleetTopics.encodeLevel(clientID),
            correlationData: Array(request.nonce.utf8), expirySeconds: expirySeconds)
        _ = try client.publish(
            topic: topics.claimRequest(host: host, user: user), payload: payload, retained: false, qos: 1,
            properties: properties)
        return request.nonce
    }

    /// Sends `request` to `host` and waits up to `timeout` seconds for its reply; `nil` when none came.
    public func ask(_ request: RemoteClaimRequest, host: String, timeout: Double = 10) throws(MQTTError)
        -> RemoteClaimReply?
    {
        let nonce = try send(request, to: host)
        let deadline = monotonicNanoseconds() + UInt64(timeout * 1e9)
        while monotonicNanoseconds() < deadline {
            if let index = inbox.firstIndex(where: { $0.nonce == nonce && $0.host == host }) {
                return inbox.remove(at: index)
            }
            try pump(milliseconds: 50)
        }
        return nil
    }

    /// The replies and notices received and not taken yet (notices, mostly: ``ask(_:host:timeout:)`` takes its
    /// reply), oldest first.
    public func takeInbox() -> [RemoteClaimReply] {
        defer { inbox.removeAll() }
        return inbox
    }

    /// Waits up to `milliseconds` for traffic and handles it.
    public func pump(milliseconds: Int32) throws(MQTTError) { _ = try pumpEvents(milliseconds: milliseconds) }

    /// The retained claim states of every host (or of `host`), read within `timeout` seconds.
    public func readClaims(host: String? = nil, timeout: Double = 1) throws(MQTTError) -> [RemoteClaimState] {
        let read = try readRetained([host.map { topics.claims(host: $0) } ?? topics.allClaims], timeout: timeout)
        return read.values.compactMap { try? JSONDecoder().decode(RemoteClaimState.self, from: Data($0)) }
            .sorted { ($0.host, $0.accessoryID, $0.connectionID) < ($1.host, $1.accessoryID, $1.connectionID) }
    }

    /// The retained messages under `filters`. MQTT has no end-of-retained marker: as the fleet view does, the client
    /// subscribes to its own marker topic (`<prefix>/$readers/<client id>`) with the filters and publishes a token
    /// there; the broker sends the retained messages of a subscription before what is published after it, so what
    /// arrived before the token is all. Without the token within `timeout` seconds (an ACL that refuses the marker),
    /// what arrived by then.
    public func readRetained(_ filters: [String], timeout: Double = 3) throws(MQTTError) -> [String: [UInt8]] {
        retained = [:]
        reading = true
        defer { reading = false }
        let marker = topics.readerSync(clientID: clientID)
        let token = Array(Self.makeNonce().utf8)
        markerSeen = false
        markerToken = token
        let subscription = try client.subscribe(filters + [marker])
        var published = false
        let deadline = monotonicNanoseconds() + UInt64(timeout * 1e9)
        while !markerSeen, monotonicNanoseconds() < deadline {
            for event in try pumpEvents(milliseconds: 20) {
                if case .subscribed(subscription, _) = event, !published {
                    _ = try client.publish(topic: marker, payload: token, retained: false, qos: 1)
                    published = true
                }
            }
        }
        try client.unsubscribe(filters + [marker])
        return retained
    }

    public func disconnect() {
        client.disconnect()
        _ = try? pumpEvents(milliseconds: 100)  // try?: gone either way
    }

    private func pumpEvents(milliseconds: Int32) throws(MQTTError) -> [MQTTClient.Event] {
        if let socket = client.socket {
            var wait = pollfd(fd: socket.rawValue, events: Int16(POLLIN | (client.wantsWrite ? POLLOUT : 0)), revents: 0)
            if poll(&wait, 1, milliseconds) > 0 {
                if Int32(wait.revents) & (POLLIN | POLLHUP | POLLERR) != 0 { client.read() }
                if Int32(wait.revents) & POLLOUT != 0 { client.write() }
            }
        } else {
            usleep(UInt32(milliseconds) * 1000)
        }
        client.housekeeping()
        if client.wantsWrite { client.write() }
        let events = client.takeEvents()
        for event in events {
            switch event {
            case .message(let topic, let payload, _, _):
                if !topic.contains("/claim-replies/") {
                    guard reading else { continue }
                    if payload == markerToken, topic == topics.readerSync(clientID: clientID) {
                        markerSeen = true
                        continue
                    }
                    if payload.isEmpty { retained.removeValue(forKey: topic) } else { retained[topic] = payload }
                } else if let reply = try? JSONDecoder().decode(RemoteClaimReply.self, from: Data(payload)) {
                    inbox.append(reply)
                }
            case .disconnected(let error) where connected:
                throw error ?? MQTTError(.unreachable, "mqtt: disconnected")
            default: break
            }
        }
        return events
    }

    static func makeNonce() -> String {
        (0..<2).map { _ in String(UInt64.random(in: 0...UInt64.max), radix: 16) }
            .map { String(repeating: "0", count: 16 - $0.count) + $0 }.joined()
    }
}
