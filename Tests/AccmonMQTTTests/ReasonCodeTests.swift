import Testing

@testable import AccmonMQTT

/// Brokers answer the same refusal with different reason codes: accmon reads them by meaning, and names the code.
@Test func aRefusedPublicationIsARefusalWhateverCodeTheBrokerGivesIt() {
    // mosquitto: 135 (Not authorized); ejabberd: 144 (Topic Name invalid), with a reason string.
    let mosquitto = MQTTError.reason(135, "mqtt: the broker refused a publication", in: .publication)
    let ejabberd = MQTTError.reason(
        144, "mqtt: the broker refused a publication", in: .publication,
        brokerSays: "Publishing to this topic is forbidden by service policy")
    #expect(mosquitto.code == .notAuthorized)
    #expect(ejabberd.code == .notAuthorized)
    #expect(mosquitto.message == "mqtt: the broker refused a publication: Not authorized (reason code 135)")
    #expect(
        ejabberd.message
            == "mqtt: the broker refused a publication: Topic Name invalid (reason code 144; the broker says "
            + "\"Publishing to this topic is forbidden by service policy\")")
    // A refused filter: 135 from mosquitto, 143 from ejabberd.
    #expect(MQTTError.reason(143, "subscribe", in: .subscription).code == .notAuthorized)
    #expect(MQTTClient.SubscriptionRefusal(index: 0, reasonCode: 143).description
        == "Topic Filter invalid (reason code 143)")
    // What MQTT cannot carry stays an invalid message; anything else the broker refuses is a refusal.
    #expect(MQTTError.reason(149, "publish", in: .publication).code == .invalidMessage)
    #expect(MQTTError.reason(131, "publish", in: .publication).code == .refused)
    // A will whose topic ejabberd's ACL refuses comes back in the CONNACK as 144.
    #expect(MQTTError.reason(144, "connect", in: .connect).code == .notAuthorized)
    #expect(MQTTError.reason(134, "connect", in: .connect).code == .credentials)
}

@Test func aBrokerThatDisconnectsAReaderThatFellBehindIsNamed() {
    let error = MQTTError.reason(151, "mqtt: mqtt://127.0.0.1:1: connection lost", in: .disconnection)
    #expect(error.code == .refused)
    #expect(
        error.message
            == "mqtt: mqtt://127.0.0.1:1: connection lost: Quota exceeded (reason code 151): the broker ends the "
            + "connection of a client that falls behind (its queue for the client is full)")
}
