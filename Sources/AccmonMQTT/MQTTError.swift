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

    /// The error for an MQTT 5 reason code of 128 or more (a refused CONNECT, PUBLISH or SUBSCRIBE).
    static func reason(_ reasonCode: Int32, _ context: String) -> MQTTError {
        let code: Code
        switch mqtt5_return_codes(rawValue: UInt32(reasonCode)) {
        case MQTT_RC_BAD_USERNAME_OR_PASSWORD: code = .credentials
        case MQTT_RC_NOT_AUTHORIZED: code = .notAuthorized
        case MQTT_RC_PACKET_TOO_LARGE, MQTT_RC_TOPIC_NAME_INVALID, MQTT_RC_PAYLOAD_FORMAT_INVALID,
            MQTT_RC_QOS_NOT_SUPPORTED, MQTT_RC_RETAIN_NOT_SUPPORTED:
            code = .invalidMessage
        default: code = .refused
        }
        return MQTTError(code, "\(context): \(reasonText(reasonCode)) (reason code \(reasonCode))")
    }

    /// libmosquitto's text for an MQTT 5 reason code, such as "Not authorized".
    public static func reasonText(_ reasonCode: Int32) -> String {
        String(cString: mosquitto_reason_string(reasonCode))
    }
}
