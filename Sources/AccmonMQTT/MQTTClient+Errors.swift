import AccmonSys
import CMosquitto
import Glibc

// How libmosquitto's statuses and the broker's reason codes become MQTTErrors that say what to check.
extension MQTTClient {
    /// The error for a refused CONNECT: a refused login (bad user name or password, not authorized: mosquitto answers
    /// a wrong password with the latter) says what to check.
    func refusal(_ reasonCode: Int32, brokerSays: String?) -> MQTTError {
        let error = MQTTError.reason(reasonCode, "mqtt: \(endpoint): connect", in: .connect, brokerSays: brokerSays)
        if reasonCode == Int32(MQTT_RC_TOPIC_NAME_INVALID.rawValue), let willTopic {
            return MQTTError(
                .notAuthorized,
                "\(error.message): the broker refused the will on '\(willTopic)'; may this user write there? "
                    + "(docs/MQTT.md, ACL)")
        }
        guard
            reasonCode == Int32(MQTT_RC_BAD_USERNAME_OR_PASSWORD.rawValue)
                || reasonCode == Int32(MQTT_RC_NOT_AUTHORIZED.rawValue)
        else { return error }
        return MQTTError(
            .credentials,
            "\(error.message): the broker refused the login; check the user name, the password file and the client "
                + "certificate")
    }

    /// The error for a disconnection status: a libmosquitto error (below 128) or the reason code of the broker's
    /// DISCONNECT; `nil` for a disconnection this client asked for.
    func disconnection(_ status: Int32, brokerSays: String? = nil) -> MQTTError? {
        if status == 0 { return nil }
        let context = accepted ? "mqtt: \(endpoint): connection lost" : "mqtt: \(endpoint): connect"
        if status >= 128 { return MQTTError.reason(status, context, in: .disconnection, brokerSays: brokerSays) }
        if status == MOSQ_ERR_ERRNO.rawValue {
            return MQTTError(.unreachable, "\(context): \(Errno.current)")
        }
        return MQTTError.library(status, context, detail: takeLoggedError())
    }
}

/// The reason string (`MQTT_PROP_REASON_STRING`) of an MQTT 5 acknowledgement or DISCONNECT, when the broker gave one:
/// ejabberd says why it refused a publication ("Publishing to this topic is forbidden by service policy").
func reasonString(_ properties: OpaquePointer?) -> String? {
    guard let properties else { return nil }
    var text: UnsafeMutablePointer<CChar>?
    guard mosquitto_property_read_string(properties, Int32(MQTT_PROP_REASON_STRING.rawValue), &text, false) != nil,
        let text
    else { return nil }
    defer { free(text) }
    return String(cString: text)
}
