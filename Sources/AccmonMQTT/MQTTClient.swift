import AccmonSys
import CMosquitto
import Glibc

/// One MQTT 5 connection through libmosquitto, driven by the caller's own poll loop.
///
/// libmosquitto can run a network thread of its own (`mosquitto_loop_start`) or be driven from the caller's loop
/// (`mosquitto_loop_read`, `_write` and `_misc` when its socket is ready). accmon drives it: the bridge owns accmond's
/// socket and the broker's in one loop on one thread, so a broker's acknowledgement and the acknowledgement it
/// releases to accmond are handled in order with no lock, and reconnection and the reconciliation that follows every
/// connection stay under the bridge's control instead of libmosquitto's automatic reconnect. The price: the caller
/// calls ``housekeeping()`` at least once a second (keep-alive), and the connection step resolves the broker's name
/// with a blocking `getaddrinfo`, which holds up this loop only (accmond queues the events meanwhile).
///
/// libmosquitto calls back only from inside this object's methods, on the calling thread; the callbacks just record an
/// ``Event``, which the caller collects with ``takeEvents()``. A client is used for one connection: after a
/// disconnection, make a new one, so that nothing libmosquitto queued for the old connection is sent on the next.
///
/// - Important: Not thread-safe: create, use and drop a client on one thread.
public final class MQTTClient {
    /// What happened on the connection, in order.
    public enum Event: Sendable, Hashable {
        /// The broker answered CONNECT: accepted when `error` is `nil`.
        case connected(error: MQTTError?)
        /// The connection ended: `error` is `nil` after ``disconnect()``.
        case disconnected(error: MQTTError?)
        /// A QoS 1 publication was acknowledged (PUBACK); `error` when the broker refused it (its reason code).
        case published(messageID: Int32, error: MQTTError?)
        /// A SUBSCRIBE was answered; `refused` lists the filters the broker did not grant.
        case subscribed(messageID: Int32, refused: [SubscriptionRefusal])
        /// An UNSUBSCRIBE was answered.
        case unsubscribed(messageID: Int32)
        /// A message arrived on a subscription, with its MQTT 5 properties.
        case message(topic: String, payload: [UInt8], retained: Bool, properties: MQTTMessageProperties)
    }

    /// A filter of a SUBSCRIBE that the broker did not grant, and its reason code.
    public struct SubscriptionRefusal: Sendable, Hashable, CustomStringConvertible {
        /// The filter's place in the SUBSCRIBE.
        public var index: Int
        /// The SUBACK's reason code for it (128 or more): mosquitto refuses a filter its ACL denies with 135, ejabberd
        /// with 143.
        public var reasonCode: Int32

        public init(index: Int, reasonCode: Int32) {
            self.index = index
            self.reasonCode = reasonCode
        }

        /// The refusal as an error with the code's meaning (``MQTTError/reason(_:_:in:brokerSays:)``).
        public func error(_ context: String) -> MQTTError {
            MQTTError.reason(reasonCode, context, in: .subscription)
        }

        /// The code and its text, such as `Topic Filter invalid (reason code 143)`.
        public var description: String { "\(MQTTError.reasonText(reasonCode)) (reason code \(reasonCode))" }
    }

    /// The message of a dead client: published by the broker when the connection is lost without DISCONNECT.
    public struct Will: Sendable, Hashable {
        public var topic: String
        public var payload: [UInt8]
        public var retained: Bool
        public init(topic: String, payload: [UInt8], retained: Bool) {
            self.topic = topic
            self.payload = payload
            self.retained = retained
        }
    }

    /// What a subscription asks of the broker (MQTT 5 subscription options).
    public struct SubscriptionOptions: OptionSet, Sendable, Hashable {
        public var rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }
        /// Not the messages this connection publishes itself (`MQTT_SUB_OPT_NO_LOCAL`).
        public static let noLocal = SubscriptionOptions(rawValue: Int32(MQTT_SUB_OPT_NO_LOCAL.rawValue))
        /// Not the retained messages present when subscribing (`MQTT_SUB_OPT_SEND_RETAIN_NEVER`).
        public static let noRetained = SubscriptionOptions(rawValue: Int32(MQTT_SUB_OPT_SEND_RETAIN_NEVER.rawValue))
        /// The retain flag as the publisher set it, also on messages forwarded live
        /// (`MQTT_SUB_OPT_RETAIN_AS_PUBLISHED`): how a subscriber tells a retained publication from another.
        public static let retainAsPublished = SubscriptionOptions(
            rawValue: Int32(MQTT_SUB_OPT_RETAIN_AS_PUBLISHED.rawValue))
    }

    /// libmosquitto's global initialisation, once per process.
    private static let libraryReady: Bool = {
        mosquitto_lib_init()
        return true
    }()

    /// Takes messages before they become events: called from inside ``read()`` with the topic's bytes and the
    /// payload as libmosquitto holds them (valid only during the call), when no event waits, so that a message taken
    /// never overtakes an event; returns whether it took the message, which otherwise becomes an ``Event/message``.
    /// For a reader whose messages are many and whose work on each is little.
    public var takeMessage: ((_ topic: UnsafeBufferPointer<UInt8>, _ payload: UnsafeRawBufferPointer) -> Bool)?

    private var messagesTaken = 0
    private let handle: OpaquePointer
    let endpoint: String
    /// The will's topic, which a broker's ACL may refuse at CONNECT (ejabberd: reason code 144).
    let willTopic: String?
    private var events: [Event] = []
    /// The last error libmosquitto logged (OpenSSL's reason for a failed handshake, for one), for messages.
    private var lastLoggedError: String?
    /// Whether the broker accepted CONNECT: a failure before is a failed connection, after it a lost one.
    private(set) var accepted = false
    /// Whether the connection's end was reported.
    private var ended = false

    /// Creates a client with its settings; nothing connects before ``connect()``.
    ///
    /// - Throws: ``MQTTError`` with ``MQTTError/Code/configuration`` when libmosquitto refuses a setting, such as a
    ///   TLS file it cannot read.
    public init(clientID: String, settings: BrokerSettings, will: Will? = nil) throws(MQTTError) {
        precondition(Self.libraryReady)
        endpoint = settings.address.description
        willTopic = will?.topic
        guard let handle = mosquitto_new(clientID, true, nil) else {
            throw MQTTError(.configuration, "mqtt: cannot create a client: \(Errno.current)")
        }
        self.handle = handle
        mosquitto_user_data_set(handle, Unmanaged.passUnretained(self).toOpaque())
        installCallbacks()
        try check(mosquitto_int_option(handle, MOSQ_OPT_PROTOCOL_VERSION, MQTT_PROTOCOL_V5), "protocol version")
        try check(mosquitto_int_option(handle, MOSQ_OPT_TCP_NODELAY, 1), "TCP_NODELAY")
        if let username = settings.username {
            try check(mosquitto_username_pw_set(handle, username, settings.password), "username")
        }
        if settings.address.usesTLS {
            // Without a CA file, the system's trust store (Debian: /etc/ssl/certs).
            let caPath = settings.caFile == nil ? "/etc/ssl/certs" : nil
            try check(
                mosquitto_tls_set(handle, settings.caFile, caPath, settings.certificateFile, settings.keyFile, nil),
                "TLS files (ca, certificate, key)")
        }
        if let will {
            let status = will.payload.withUnsafeBytes { bytes in
                mosquitto_will_set_v5(
                    handle, will.topic, Int32(bytes.count), bytes.baseAddress, 1, will.retained, nil)
            }
            try check(status, "will message")
        }
    }

    deinit { mosquitto_destroy(handle) }

    /// Starts connecting (without waiting): the TCP connection, the TLS handshake and CONNECT proceed as the caller
    /// drives ``read()`` and ``write()``; ``Event/connected(error:)`` or ``Event/disconnected(error:)`` tells the end.
    ///
    /// - Throws: ``MQTTError`` when the connection fails at once (name not found, refused on this host).
    public func connect(address: BrokerAddress, keepAliveSeconds: Int) throws(MQTTError) {
        let status = mosquitto_connect_bind_async(
            handle, address.host, Int32(address.port), Int32(keepAliveSeconds), nil)
        guard status == MOSQ_ERR_SUCCESS.rawValue else {
            throw MQTTError.library(status, "mqtt: \(endpoint): connect", detail: takeLoggedError())
        }
    }

    /// The connection's socket while there is one: watch it for readability, and for writability while
    /// ``wantsWrite``.
    public var socket: FileDescriptor? {
        let descriptor = mosquitto_socket(handle)
        return descriptor < 0 ? nil : FileDescriptor(rawValue: descriptor)
    }

    /// Whether libmosquitto has bytes waiting for the socket to become writable.
    public var wantsWrite: Bool { mosquitto_want_write(handle) }

    /// Reads what the socket holds and handles it (acknowledgements, messages); call when it is readable. Returns
    /// whether ``takeMessage`` took a message meanwhile (the events tell the rest).
    @discardableResult
    public func read() -> Bool {
        let taken = messagesTaken
        endIfFailed(mosquitto_loop_read(handle, 1))
        return messagesTaken != taken
    }

    /// Turns off delayed acknowledgements until the next read (`TCP_QUICKACK`, which the kernel resets): a broker
    /// with Nagle's algorithm on (mosquitto's default, `set_tcp_nodelay false`) holds its last small packet until the
    /// previous ones are acknowledged, 40 ms later with delayed acknowledgements, on every round trip.
    public func acknowledgeQuickly() {
        var on: Int32 = 1
        let descriptor = mosquitto_socket(handle)
        guard descriptor >= 0 else { return }
        _ = setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_QUICKACK, &on, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Writes what is waiting; call when the socket is writable.
    public func write() { endIfFailed(mosquitto_loop_write(handle, 1)) }

    /// Keep-alive pings and their timeout; call at least once a second while connected.
    public func housekeeping() { endIfFailed(mosquitto_loop_misc(handle)) }

    /// Reports the end of the connection when a loop step failed without libmosquitto calling back (a failed TLS
    /// handshake returns its error and nothing else).
    private func endIfFailed(_ status: Int32) {
        guard !ended, status != MOSQ_ERR_SUCCESS.rawValue, status != MOSQ_ERR_NO_CONN.rawValue,
            status != MOSQ_ERR_CONN_PENDING.rawValue
        else { return }
        ended = true
        events.append(.disconnected(error: disconnection(status)))
    }

    /// The events since the last call, in order.
    public func takeEvents() -> [Event] {
        defer { events.removeAll(keepingCapacity: true) }
        return events
    }

    /// Publishes with QoS 1; returns the message id that ``Event/published(messageID:error:)`` will carry (for QoS 0,
    /// once the message is written). Queued by libmosquitto beyond the broker's in-flight window.
    ///
    /// - Throws: ``MQTTError`` with ``MQTTError/Code/invalidMessage`` when MQTT cannot carry the message (topic not
    ///   valid UTF-8 or too long, packet too large for the broker); with another code when the connection failed.
    public func publish(topic: String, payload: [UInt8], retained: Bool) throws(MQTTError) -> Int32 {
        try publish(topic: topic, payload: payload, retained: retained, qos: 1)
    }

    /// Publishes with QoS `qos` (0 or 1) and MQTT 5 `properties`; as ``publish(topic:payload:retained:)``.
    public func publish(
        topic: String, payload: [UInt8], retained: Bool, qos: Int32, properties: MQTTMessageProperties = .none
    ) throws(MQTTError) -> Int32 {
        var messageID: Int32 = 0
        let list = properties.makeList()
        defer { if list != nil { var owned = list; mosquitto_property_free_all(&owned) } }
        let status = payload.withUnsafeBytes { raw in
            mosquitto_publish_v5(handle, &messageID, topic, Int32(raw.count), raw.baseAddress, qos, retained, list)
        }
        guard status == MOSQ_ERR_SUCCESS.rawValue else {
            let error = MQTTError.library(status, "mqtt: publish to '\(topic)'")
            // Here an invalid argument is the topic (too long for MQTT, or a wildcard in it).
            throw status == MOSQ_ERR_INVAL.rawValue ? MQTTError(.invalidMessage, error.message) : error
        }
        return messageID
    }

    /// Subscribes to `filters` at QoS 0 with `options`; returns the message id of the SUBSCRIBE.
    public func subscribe(_ filters: [String], options: SubscriptionOptions = []) throws(MQTTError) -> Int32 {
        var messageID: Int32 = 0
        var strings = filters.map { strdup($0) }
        defer { for string in strings { free(string) } }
        let status = strings.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: UnsafeMutablePointer<CChar>?.self, capacity: buffer.count) {
                mosquitto_subscribe_multiple(handle, &messageID, Int32(filters.count), $0, 0, options.rawValue, nil)
            }
        }
        guard status == MOSQ_ERR_SUCCESS.rawValue else {
            throw MQTTError.library(status, "mqtt: subscribe to \(filters.joined(separator: ", "))")
        }
        return messageID
    }

    /// Unsubscribes from `filters`; returns the message id of the UNSUBSCRIBE.
    ///
    /// - Note: To change a subscription's options, unsubscribe first: mosquitto 2.0 keeps the no-local option of an
    ///   existing subscription when the same filter is subscribed again.
    @discardableResult
    public func unsubscribe(_ filters: [String]) throws(MQTTError) -> Int32 {
        var messageID: Int32 = 0
        var strings = filters.map { strdup($0) }
        defer { for string in strings { free(string) } }
        let status = strings.withUnsafeMutableBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: UnsafeMutablePointer<CChar>?.self, capacity: buffer.count) {
                mosquitto_unsubscribe_multiple(handle, &messageID, Int32(filters.count), $0, nil)
            }
        }
        guard status == MOSQ_ERR_SUCCESS.rawValue else {
            throw MQTTError.library(status, "mqtt: unsubscribe from \(filters.joined(separator: ", "))")
        }
        return messageID
    }

    /// Sends DISCONNECT (so the broker does not publish the will) and closes; ``Event/disconnected(error:)`` follows.
    public func disconnect() {
        _ = mosquitto_disconnect_v5(handle, 0, nil)
    }

    private func check(_ status: Int32, _ setting: String) throws(MQTTError) {
        guard status == MOSQ_ERR_SUCCESS.rawValue else {
            let error = MQTTError.library(status, "mqtt: \(endpoint): \(setting)", detail: takeLoggedError())
            throw MQTTError(.configuration, error.message)
        }
    }

    func takeLoggedError() -> String? {
        defer { lastLoggedError = nil }
        return lastLoggedError
    }

    // MARK: Callbacks (called by libmosquitto from inside the methods above, on the caller's thread)

    private static func client(_ userdata: UnsafeMutableRawPointer?) -> MQTTClient {
        Unmanaged<MQTTClient>.fromOpaque(userdata!).takeUnretainedValue()
    }

    private func installCallbacks() {
        mosquitto_connect_v5_callback_set(handle) { handle, _, reasonCode, _, properties in
            let client = MQTTClient.client(mosquitto_userdata(handle))
            client.accepted = reasonCode == 0
            // libmosquitto formats every log line (one per packet) before calling back, whatever its level; the
            // callback is for the reason of a failed connection (OpenSSL's, for one), so it goes once connected.
            if reasonCode == 0 { mosquitto_log_callback_set(handle, nil) }
            let error = reasonCode == 0 ? nil : client.refusal(reasonCode, brokerSays: reasonString(properties))
            client.events.append(.connected(error: error))
        }
        mosquitto_disconnect_v5_callback_set(handle) { _, userdata, status, properties in
            let client = MQTTClient.client(userdata)
            guard !client.ended else { return }
            client.ended = true
            let error = client.disconnection(status, brokerSays: reasonString(properties))
            client.events.append(.disconnected(error: error))
        }
        mosquitto_publish_v5_callback_set(handle) { _, userdata, messageID, reasonCode, properties in
            let client = MQTTClient.client(userdata)
            // Reason codes below 128 are successes (0, or 16: accepted, but no subscriber matched).
            let error =
                reasonCode < 128
                ? nil
                : MQTTError.reason(
                    reasonCode, "mqtt: the broker refused a publication", in: .publication,
                    brokerSays: reasonString(properties))
            client.events.append(.published(messageID: messageID, error: error))
        }
        mosquitto_subscribe_v5_callback_set(handle) { _, userdata, messageID, count, granted, _ in
            let refused = (0..<Int(count)).compactMap { index -> SubscriptionRefusal? in
                let code = granted?[index] ?? 128
                return code >= 128 ? SubscriptionRefusal(index: index, reasonCode: code) : nil
            }
            MQTTClient.client(userdata).events.append(.subscribed(messageID: messageID, refused: refused))
        }
        mosquitto_unsubscribe_v5_callback_set(handle) { _, userdata, messageID, _ in
            MQTTClient.client(userdata).events.append(.unsubscribed(messageID: messageID))
        }
        mosquitto_message_v5_callback_set(handle) { _, userdata, message, properties in
            guard let message = message?.pointee, let topic = message.topic else { return }
            let client = MQTTClient.client(userdata)
            if let take = client.takeMessage, client.events.isEmpty {
                let topicBytes = UnsafeBufferPointer(
                    start: UnsafeRawPointer(topic).assumingMemoryBound(to: UInt8.self), count: strlen(topic))
                if take(topicBytes, UnsafeRawBufferPointer(start: message.payload, count: Int(message.payloadlen))) {
                    client.messagesTaken &+= 1
                    return
                }
            }
            let payload =
                message.payloadlen > 0 && message.payload != nil
                ? Array(UnsafeRawBufferPointer(start: message.payload, count: Int(message.payloadlen))) : []
            client.events.append(
                .message(
                    topic: String(cString: topic), payload: payload, retained: message.retain,
                    properties: MQTTMessageProperties(reading: properties)))
        }
        mosquitto_log_callback_set(handle) { _, userdata, level, text in
            guard level & (MOSQ_LOG_ERR | MOSQ_LOG_WARNING) != 0, let text else { return }
            MQTTClient.client(userdata).lastLoggedError = String(cString: text)
        }
    }
}
