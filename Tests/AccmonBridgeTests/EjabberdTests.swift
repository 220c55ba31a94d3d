import AccmonClient
import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// Where ejabberd answers differently from mosquitto (docs/MQTT.md §10): its ACL's refusals come back as other reason
/// codes, and it disconnects a client that falls behind instead of dropping messages for it. The suites that run
/// against both brokers are in the other files (`BrokerKind`).
extension BridgeProcessTests {
    @Suite struct EjabberdDifferences {
        /// lab-1's login publishing as host lab-2: ejabberd's ACL refuses the bridge's will at CONNECT with reason code
        /// 144 (Topic Name invalid), where mosquitto answers 135: the bridge reads it as the refusal it is (at error
        /// level, with the code and the broker's words) and publishes nothing there.
        @Test func aHostWritingUnderAnotherNameIsRefusedAndTheCodeNamed() async throws {
            let broker = try await Ejabberd.start(Ejabberd.Options(users: ["lab-1"], bridges: ["lab-1"]))
            let host = try await BridgedHost.start(
                name: "lab-2", broker: broker.url, settings: try broker.bridgeSettings(host: "lab-1"))
            let connection = try await host.connect()
            defer { connection.close() }
            _ = try await connection.simulateConnect(Accessory(kind: .usb, name: "sneaky"))
            #expect(
                await waitFor(
                    "error: mqtt: \(broker.url): connect: Topic Name invalid (reason code 144; the broker says "
                        + "\"Publishing to this will topic is forbidden by service policy\"): the broker refused the "
                        + "will on 'accmon/lab-2/status'; may this user write there? (docs/MQTT.md, ACL)"
                ) { host.bridgeLog }, "\(host.logTail())")
            let state = try await fleetState(broker)
            #expect(state.hosts["lab-2"] == nil, "\(state.hosts)")
        }
    }
}
