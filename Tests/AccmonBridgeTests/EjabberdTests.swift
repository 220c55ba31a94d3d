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

        /// ejabberd ends the connection of a reader whose session holds more than the listener's `max_fsm_queue`
        /// messages it could not send (here a watcher stopped with SIGSTOP during a burst; ejabberd logs "Message queue
        /// is overloaded", and sends the reason code 151, Quota exceeded, when the socket still takes it): `accmon
        /// watch` says it lost the connection, reads the fleet again and ends with the truth.
        @Test func aWatcherEjabberdDisconnectsForFallingBehindReadsAgain() async throws {
            let broker = try await Ejabberd.start(
                Ejabberd.Options(users: ["lab-1"], bridges: ["lab-1"], listen: ["max_fsm_queue: 200"]))
            let host = try await BridgedHost.start(name: "lab-1", on: broker)
            #expect(await waitFor("mqtt: synchronized") { host.bridgeLog }, "\(host.logTail())")
            let watch = try ChildProcess(
                try Binaries.accmon, ["watch", "--broker", broker.url, "--json"] + broker.cliLogin(), name: "watch",
                directory: broker.directory)
            #expect(await waitFor(#""type":"fleet""#) { watch.stdout })
            watch.send(SIGSTOP)
            // Big accessory objects fill the socket's buffers quickly; then ejabberd's queue for the watcher fills.
            let connection = try await host.connect()
            defer { connection.close() }
            let connections = try await Self.plugBig(1500, on: connection)
            for id in connections.prefix(700) { try await connection.simulateDisconnect(id) }
            #expect(try await waitForFleet([host], broker: broker, timeout: .seconds(60)).isEmpty, "\(host.logTail())")
            watch.send(SIGCONT)
            let truth = Set(try await host.truth().keys)
            #expect(
                await eventuallyHolds(timeout: .seconds(30)) { watchView(watch.stdout)["lab-1"] == truth },
                "\(watch.stderr)")
            #expect(watch.stderr.contains("connection lost"), "\(watch.stderr)")
            #expect(watch.stderr.contains("reconnecting in"), "\(watch.stderr)")
            #expect(
                broker.log.contains("Closing MQTT session for tester@localhost/accmon-cli-\(watch.pid)-")
                    && broker.log.contains("Message queue is overloaded"), "\(broker.log.suffix(2000))")
        }

        /// The same for `accmon list --broker`: a proxy holds what ejabberd sends it once it subscribed to the host
        /// (12 MB of retained accessory objects, more than the sockets' buffers), so that ejabberd's session for it
        /// blocks while a burst's changes pile up behind; when the proxy passes them on, ejabberd ends the session.
        /// `list` reads again, saying so, and shows the host.
        @Test func aListEjabberdDisconnectsForFallingBehindReadsAgain() async throws {
            let broker = try await Ejabberd.start(
                Ejabberd.Options(users: ["lab-1"], bridges: ["lab-1"], listen: ["max_fsm_queue: 100"]))
            let host = try await BridgedHost.start(name: "lab-1", on: broker)
            let connection = try await host.connect()
            defer { connection.close() }
            _ = try await Self.plugBig(400, bytes: 30_000, on: connection)
            #expect(try await waitForFleet([host], broker: broker, timeout: .seconds(60)).isEmpty, "\(host.logTail())")
            let proxy = try PausingProxy(to: broker.port, pausingAfter: "accmon/lab-1/accessories/+/+")
            defer { proxy.stop() }
            let list = try ChildProcess(
                try Binaries.accmon,
                ["list", "--broker", "mqtt://127.0.0.1:\(proxy.port)", "--host", "lab-1", "--json"]
                    + broker.cliLogin(), name: "list", directory: broker.directory)
            #expect(await eventuallyHolds { proxy.isPaused })
            var random = SplitMix64(seed: SplitMix64.testSeed())
            var plugger = Plugger(connection)
            try await plugger.storm(steps: 300, target: 30, using: &random)
            try await Task.sleep(for: .milliseconds(300))  // the burst's last publications routed
            proxy.resume()
            let ended = await list.waitForExit(timeout: .seconds(60))
            #expect(ended == .exited(0), "\(list.stderr)")
            #expect(list.stderr.contains("connection lost") && list.stderr.contains("reading again"), "\(list.stderr)")
            #expect(
                await eventuallyHolds { broker.log.contains("Message queue is overloaded") },
                "\(broker.log.suffix(2000))")
            let object = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: Any])
            let hosts = try #require(object["hosts"] as? [[String: Any]])
            #expect((hosts.first?["accessories"] as? [Any])?.count == (try await host.truth().count), "\(list.stderr)")
        }

        /// Plugs `count` accessories whose objects are about `bytes` each.
        static func plugBig(_ count: Int, bytes: Int = 8000, on connection: AccmonConnection) async throws
            -> [ConnectionID]
        {
            let name = String(repeating: "n", count: bytes)
            var connections: [ConnectionID] = []
            for index in 0..<count {
                connections.append(
                    try await connection.simulateConnect(Accessory(kind: .usb, name: "\(index) \(name)")))
            }
            return connections
        }
    }
}
