import CMosquitto

/// A failure of libmosquitto or of the broker, with a message that names the cause.
public struct MQTTError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What kind of failure this is; stable, for programs and tests.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The broker cannot be reached (refused, unreachable, name not found) or the connection broke.
        public static let unreachable = Code(rawValue: "unreachable")
        /// The TLS handshake failed: an untrusted or mismatched certificate, or a refused client certificate.
        public static let tls = Code(rawValue: "tls")
        /// The broker refused the user name, the password or the client certificate.
        public static let credentials = Code(rawValue: "credentials")
        /// The broker refused an operation this client is not allowed (its ACL).
        public static let notAuthorized = Code(rawValue: "not-authorized")
        /// The broker refused the connection for another reason, or broke the protocol.
        public static let refused = Code(rawValue: "refused")
        /// A message that MQTT cannot carry (topic not valid UTF-8, packet too large).
        public static let invalidMessage = Code(rawValue: "invalid-message")
        /// A setting libmosquitto refused (a TLS file it cannot use, an option).
        public static let configuration = Code(rawValue: "configuration")
    }

    /// The kind of failure.
    public var code: Code
    /// What happened, as `context: object: reason`.
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }

    /// The error for libmosquitto's return value `status` (`MOSQ_ERR_*`), with `context` in front; `detail` (the
    /// last error libmosquitto logged, such as OpenSSL's reason) added when there is one.
    static func library(_ status: Int32, _ context: String, detail: String? = nil) -> MQTTError {
        var reason = String(cString: mosquitto_strerror(status))
        if reason.hasSuffix(".") { reason.removeLast() }
        let code: Code
        switch mosq_err_t(rawValue: status) {
        case MOSQ_ERR_TLS, MOSQ_ERR_TLS_HANDSHAKE, MOSQ_ERR_OCSP: code = .tls
        case MOSQ_ERR_AUTH: code = .credentials
        case MOSQ_ERR_ACL_DENIED: code = .notAuthorized
        case MOSQ_ERR_PAYLOAD_SIZE, MOSQ_ERR_MALFORMED_UTF8, MOSQ_ERR_OVERSIZE_PACKET, MOSQ_ERR_QOS_NOT_SUPPORTED,
            MOSQ_ERR_RETAIN_NOT_SUPPORTED:
            code = .invalidMessage
        case MOSQ_ERR_PROTOCOL, MOSQ_ERR_CONN_REFUSED, MOSQ_ERR_MALFORMED_PACKET, MOSQ_ERR_NOT_SUPPORTED:
            code = .refused
        default: code = .unreachable
        }
        let detailText = detail.map { "; \($0)" } ?? ""
        return MQTTError(code, "\(context): \(reason)\(detailText)")
    }

    /// The packet an MQTT 5 reason code answers: the same number means different things in different answers, and
    /// brokers answer the same refusal with different numbers.
    public enum Answer: Sendable, Hashable {
        /// CONNACK: the login.
        case connect
        /// PUBACK: one publication.
        case publication
        /// SUBACK: one filter of a SUBSCRIBE.
        case subscription
        /// The broker's DISCONNECT: why it ended the connection.
        case disconnection
    }

    /// The error for an MQTT 5 reason code of 128 or more in `answer`, read by its meaning: a refusal is a refusal
    /// whichever number the broker gives it. mosquitto refuses a publication or a filter its ACL denies with 135 (Not
    /// authorized); ejabberd with 144 (Topic Name invalid) and 143 (Topic Filter invalid). accmon never sends a topic
    /// or filter that is not valid (libmosquitto refuses one before it is sent), so a broker that calls one invalid
    /// refuses it by its policy. The message names the code, and the reason string the broker gave with it, if any.
    static func reason(
        _ reasonCode: Int32, _ context: String, in answer: Answer = .connect, brokerSays: String? = nil
    ) -> MQTTError {
        let code: Code
        switch (answer, mqtt5_return_codes(rawValue: UInt32(reasonCode))) {
        case (_, MQTT_RC_BAD_USERNAME_OR_PASSWORD): code = .credentials
        case (_, MQTT_RC_NOT_AUTHORIZED): code = .notAuthorized
        case (.publication, MQTT_RC_TOPIC_NAME_INVALID), (.subscription, MQTT_RC_TOPIC_FILTER_INVALID):
            code = .notAuthorized
        case (_, MQTT_RC_PACKET_TOO_LARGE), (_, MQTT_RC_PAYLOAD_FORMAT_INVALID), (_, MQTT_RC_QOS_NOT_SUPPORTED),
            (_, MQTT_RC_RETAIN_NOT_SUPPORTED):
            code = .invalidMessage
        case (.connect, MQTT_RC_TOPIC_NAME_INVALID):
            // The will's topic: refused by the broker's ACL (ejabberd).
            code = .notAuthorized
        default: code = .refused
        }
        let said = brokerSays.map { $0.isEmpty ? "" : "; the broker says \"\($0)\"" } ?? ""
        var hint = ""
        if answer == .disconnection, reasonCode == Int32(MQTT_RC_QUOTA_EXCEEDED.rawValue) {
            hint = ": the broker ends the connection of a client that falls behind (its queue for the client is full)"
        }
        return MQTTError(code, "\(context): \(reasonText(reasonCode)) (reason code \(reasonCode)\(said))\(hint)")
    }

    /// libmosquitto's text for an MQTT 5 reason code, such as "Not authorized".
    public static func reasonText(_ reasonCode: Int32) -> String {
        String(cString: mosquitto_reason_string(reasonCode))
    }
}
