import AccmonClient
import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// The host's online status is a lease (docs/MQTT.md §3): a bridge that stops speaking without a will (stopped with
/// SIGSTOP here, with a keep-alive the broker waits 90 s for; a site broker killed between it and the centre in
/// SiteTests) is not shown online past its lease.
extension BridgeProcessTests {
    @Suite struct StatusLeases {
        @Test(arguments: BrokerKind.allCases) func aHostWhoseBridgeStopsSpeakingGoesStaleThenComesBack(
            kind: BrokerKind
        ) async throws {
            let broker = try await startBroker(kind, bridges: ["lab-1"])
            let host = try await BridgedHost.start(
                name: "lab-1", on: broker, settings: ["statusLeaseSeconds": "3", "keepAlive": "60"])
            let connection = try await host.connect()
            defer { connection.close() }
            _ = try await connection.simulateConnect(Accessory(kind: .usb, name: "one", serialNumber: "L1"))
            _ = try await connection.simulateConnect(Accessory(kind: .serial, name: "two", serialNumber: "L2"))
            #expect(try await waitForFleet([host], broker: broker).isEmpty, "\(host.logTail())")
            let login = try broker.cliLogin()
            let watch = try ChildProcess(
                try Binaries.accmon, ["watch", "--broker", broker.url, "--json"] + login, name: "watch",
                directory: broker.directory)
            let human = try ChildProcess(
                try Binaries.accmon, ["watch", "--broker", broker.url] + login, name: "human",
                directory: broker.directory)
            #expect(await waitFor(#""type":"fleet""#) { watch.stdout })
            #expect(await waitFor("lab-1  online") { human.stdout })

            // Renewals keep it online past its lease.
            try await Task.sleep(for: .seconds(4))
            #expect(!watch.stdout.contains(#""type":"status"}"#), "\(watch.stdout)")

            let stopped = ContinuousClock.now
            host.bridge?.send(SIGSTOP)
            #expect(
                await waitFor(#"{"host":"lab-1","state":"stale""#, timeout: .seconds(10)) {
                    watch.stdout
                }, "\(watch.stdout)\n\(watch.stderr)")
            let staleAfter = ContinuousClock.now - stopped
            #expect(staleAfter < .seconds(6), "at most the lease, a renewal interval and a read: \(staleAfter)")
            #expect(await waitFor("lab-1  stale") { human.stdout }, "\(human.stdout)")
            // A fresh read: the broker expired the status; the host, known by its index entry, is unknown, with the
            // accessories it last published.
            let listed = try await run(
                try Binaries.accmon, ["list", "--broker", broker.url, "--json"] + login, in: broker.directory)
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any])
            let hosts = try #require(object["hosts"] as? [[String: Any]], "\(listed)")
            #expect(
                hosts.first?["host"] as? String == "lab-1" && hosts.first?["state"] as? String == "unknown", "\(hosts)")
            #expect((hosts.first?["accessories"] as? [Any])?.count == 2, "\(listed)")
            let table = try await run(
                try Binaries.accmon, ["list", "--broker", broker.url] + login, in: broker.directory)
            #expect(table.stdout.split(separator: "\n").dropFirst().allSatisfy { $0.hasPrefix("lab-1  unknown") })

            host.bridge?.send(SIGCONT)
            #expect(
                await waitFor(#"{"host":"lab-1","state":"online""#) { watch.stdout },
                "\(watch.stdout)\n\(host.logTail())")
            #expect(try await waitForFleet([host], broker: broker).isEmpty, "\(host.logTail())")
            let stale = watch.stdout.range(of: #""state":"stale""#)!
            #expect(watch.stdout[stale.upperBound...].contains(#""state":"online""#))
            #expect(await waitFor("lab-1  online") { String(human.stdout.split(separator: "stale").last ?? "") })
        }
    }
}
