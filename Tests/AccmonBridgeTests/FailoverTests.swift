import AccmonClient
import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

extension BridgeProcessTests {
    /// A broker of several addresses (docs/MQTT.md §2): a client that cannot connect, or is dropped, tries the next
    /// one at once.
    @Suite struct Failover {
        /// Two listeners of "one broker" (two mosquittos here, each of which the bridge fills with its truth): the
        /// first killed with SIGKILL, the bridge, a watcher and a claim gateway move to the second at once, and a
        /// fresh `list` with both URLs reads it; the host's changes while it moved all arrive.
        @Test func aKilledBrokerAddressIsLeftForTheNextAtOnce() async throws {
            let nodeA = try await Mosquitto.start()
            let nodeB = try await Mosquitto.start()
            let urls = "\(nodeA.url),\(nodeB.url)"
            let host = try await BridgedHost.start(
                name: "lab-1", broker: nodeA.url,
                settings: ["broker": "[\(json(nodeA.url)), \(json(nodeB.url))]"])
            let connection = try await host.connect()
            defer { connection.close() }
            var random = SplitMix64(seed: SplitMix64.testSeed())
            var plugger = Plugger(connection)
            try await plugger.storm(steps: 10, target: 6, using: &random)
            #expect(try await waitForFleet([host], broker: nodeA).isEmpty, "\(host.logTail())")
            let watch = try ChildProcess(
                try Binaries.accmon, ["watch", "--broker", urls, "--json"], name: "watch", directory: nodeA.directory)
            #expect(await waitFor(#""type":"fleet""#) { watch.stdout })

            nodeA.kill9()
            try await plugger.storm(steps: 10, target: 6, using: &random)
            #expect(
                await waitFor("accmond keeps the events meanwhile; trying \(nodeB.url) at once") {
                    host.bridgeLog
                }, "\(host.logTail())")
            let difference = try await waitForFleet([host], broker: nodeB, timeout: .seconds(10))
            #expect(difference.isEmpty, "\(difference)\n\(host.logTail())")
            // No back-off before the second address: the log never says "reconnecting in" for the first failure.
            #expect(!host.bridgeLog.contains("reconnecting in"), "\(host.logTail())")
            #expect(host.bridgeLog.contains("mqtt: connected to \(nodeB.url)"), "\(host.logTail())")

            // The watcher followed through the second address, and ends with the truth.
            let truth = Set(try await host.truth().keys)
            #expect(await eventuallyHolds(timeout: .seconds(10)) { watchView(watch.stdout) == ["lab-1": truth] })
            #expect(watch.stderr.contains("reconnecting through \(nodeB.url)"), "\(watch.stderr)")

            // A fresh reader given both, the first dead: reads the second; given the dead one alone: exit 69.
            let list = try await run(try Binaries.accmon, ["list", "--broker", urls, "--json"], in: nodeB.directory)
            #expect(list.termination == .exited(0), "\(list.stderr)")
            #expect(list.stdout.contains(#""host":"lab-1""#) && list.stdout.contains(#""state":"online""#))
            let dead = try await run(try Binaries.accmon, ["list", "--broker", nodeA.url], in: nodeB.directory)
            #expect(dead.termination == .exited(69), "\(dead.stderr)")
        }

        /// Every address unreachable: one round tried at once, then the back-off of one address, round after round.
        @Test func everyAddressDownBacksOffBetweenRounds() async throws {
            let ports = [try freeTCPPort(), try freeTCPPort()]
            let host = try await BridgedHost.start(
                name: "alone", broker: "mqtt://127.0.0.1:\(ports[0]), mqtt://127.0.0.1:\(ports[1])")
            #expect(
                await waitFor("reconnecting in 0.2 s (mqtt://127.0.0.1:\(ports[0])) (attempt 2)") { host.bridgeLog },
                "\(host.logTail())")
            let log = host.bridgeLog
            #expect(
                log.contains(
                    "mqtt://127.0.0.1:\(ports[0]): connect: Connection refused; trying mqtt://127.0.0.1:\(ports[1]) at once"
                ))
            #expect(log.contains("mqtt://127.0.0.1:\(ports[1]): connect: Connection refused; reconnecting in 0.1 s"))
        }
    }
}
