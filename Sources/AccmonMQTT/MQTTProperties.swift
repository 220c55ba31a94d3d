import CMosquitto
import Glibc

/// The MQTT 5 properties of a message that request and reply use (docs/MQTT.md §12): the response topic, the
/// correlation data and the message expiry interval. Empty when a message has none.
public struct MQTTMessageProperties: Sendable, Hashable {
    /// Where the sender asks for the reply (`MQTT_PROP_RESPONSE_TOPIC`).
    public var responseTopic: String?
    /// Bytes the reply carries back unchanged (`MQTT_PROP_CORRELATION_DATA`).
    public var correlationData: [UInt8]?
    /// Seconds the message lives (`MQTT_PROP_MESSAGE_EXPIRY_INTERVAL`); on a received message, what is left of it.
    public var expirySeconds: UInt32?

    public init(responseTopic: String? = nil, correlationData: [UInt8]? = nil, expirySeconds: UInt32? = nil) {
        self.responseTopic = responseTopic
        self.correlationData = correlationData
        self.expirySeconds = expirySeconds
    }

    public static let none = MQTTMessageProperties()

    /// The properties of a received message, read from libmosquitto's list.
    init(reading list: OpaquePointer?) {
        guard let list else { return }
        var text: UnsafeMutablePointer<CChar>?
        if mosquitto_property_read_string(list, Int32(MQTT_PROP_RESPONSE_TOPIC.rawValue), &text, false) != nil,
            let text
        {
            responseTopic = String(cString: text)
            free(text)
        }
        var bytes: UnsafeMutableRawPointer?
        var length: UInt16 = 0
        if mosquitto_property_read_binary(list, Int32(MQTT_PROP_CORRELATION_DATA.rawValue), &bytes, &length, false)
            != nil
        {
            correlationData = bytes.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(length))) } ?? []
            free(bytes)
        }
        var expiry: UInt32 = 0
        if mosquitto_property_read_int32(list, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), &expiry, false)
            != nil
        {
            expirySeconds = expiry
        }
    }

    /// A libmosquitto property list of these properties (free it with `mosquitto_property_free_all`); `nil` when
    /// there are none, or when libmosquitto refuses one (a response topic that is not valid UTF-8).
    func makeList() -> OpaquePointer? {
        var list: OpaquePointer?
        if let responseTopic {
            _ = mosquitto_property_add_string(&list, Int32(MQTT_PROP_RESPONSE_TOPIC.rawValue), responseTopic)
        }
        if let correlationData {
            _ = correlationData.withUnsafeBytes { raw in
                mosquitto_property_add_binary(
                    &list, Int32(MQTT_PROP_CORRELATION_DATA.rawValue), raw.baseAddress, UInt16(min(raw.count, 65_535)))
            }
        }
        if let expirySeconds {
            _ = mosquitto_property_add_int32(&list, Int32(MQTT_PROP_MESSAGE_EXPIRY_INTERVAL.rawValue), expirySeconds)
        }
        return list
    }
}
