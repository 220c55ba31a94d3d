import AccmonClient
import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

extension BridgeProcessTests {
    /// A cluster of two ejabberd nodes, each with its own index of retained topics (docs/MQTT.md §11): what accmon
    /// needs of a cluster it does not give, and what accmon does about it.
    @Suite struct EjabberdClusterTests {
        /// lab-1's bridge on node A, lab-2's on node B. Through B, the census finds lab-1 (B's retained store does not
        /// give it), online; its accessories, which B does not deliver, are named as missing (counted and read) and
        /// `list` exits 1; `--host lab-1` and a host nobody answers for exit 1 naming the host. Then A killed: lab-1,
        /// whose bridge knows no other node, is not shown online through B.
        @Test func throughEitherNodeTheCensusFindsEveryHostAndAPartialReadIsNamed() async throws {
            let cluster = try await EjabberdCluster.start(bridges: ["lab-1", "lab-2"])
            let lab1 = try await BridgedHost.start(name: "lab-1", on: cluster.a)
            let lab2 = try await BridgedHost.start(name: "lab-2", on: cluster.b)
            for (host, count) in [(lab1, 3), (lab2, 2)] {
                let connection = try await host.connect()
                defer { connection.close() }
                var random = SplitMix64(seed: SplitMix64.testSeed())
                var plugger = Plugger(connection)
                for _ in 0..<count { try await plugger.plug(using: &random) }
            }
            #expect(try await waitForFleet([lab1], broker: cluster.a).isEmpty, "\(lab1.logTail())")
            #expect(try await waitForFleet([lab2], broker: cluster.b).isEmpty, "\(lab2.logTail())")

            let login = try cluster.b.cliLogin()
            let list = try await run(
                try Binaries.accmon, ["list", "--broker", cluster.b.url, "--json"] + login, in: cluster.b.directory)
            #expect(list.termination == .exited(1), "\(list)")
            #expect(
                list.stderr.contains("accmon: host 'lab-1': its status counts 3 accessory topics, 0 read"), "\(list)")
            let hosts = try fleetHosts(list.stdout)
            #expect(hosts["lab-1"]?.state == "online" && hosts["lab-1"]?.accessories == 0, "\(list.stdout)")
            #expect(hosts["lab-2"]?.state == "online" && hosts["lab-2"]?.accessories == 2, "\(list.stdout)")
            #expect(!list.stderr.contains("host 'lab-2'"), "\(list.stderr)")

            let one = try await run(
                try Binaries.accmon, ["list", "--broker", cluster.b.url, "--host", "lab-1"] + login,
                in: cluster.b.directory)
            #expect(one.termination == .exited(1) && one.stderr.contains("host 'lab-1'"), "\(one)")
            let nobody = try await run(
                try Binaries.accmon, ["list", "--broker", cluster.b.url, "--host", "lab-9"] + login,
                in: cluster.b.directory)
            #expect(
                nobody.termination == .exited(1)
                    && nobody.stderr.contains("host 'lab-9': the broker serves no status for it"), "\(nobody)")

            // lab-1's node killed: its bridge is on no node, and lab-1 is not online through B.
            cluster.a.kill9()
            let after = try await run(
                try Binaries.accmon, ["list", "--broker", cluster.b.url, "--json"] + login, in: cluster.b.directory)
            #expect(try fleetHosts(after.stdout)["lab-1"]?.state != "online", "\(after)")
        }

        /// A watcher on node B while lab-1's bridge, with two accessories, is on node A: a plug on lab-1 comes live
        /// through the cluster, its status counts three where one is shown, and reading lab-1 again through B finds
        /// nothing of it; the watcher shows it `unconfirmed`, never a
        /// disconnection, and lab-1 stays online. The unplug, a deletion the broker delivers, is a disconnection.
        @Test func aWatcherOnTheOtherNodeReportsNoDisconnectItDidNotSee() async throws {
            let cluster = try await EjabberdCluster.start(bridges: ["lab-1"])
            let lab1 = try await BridgedHost.start(name: "lab-1", on: cluster.a)
            let connection = try await lab1.connect()
            defer { connection.close() }
            for serial in ["S1", "S2"] {
                _ = try await connection.simulateConnect(
                    Accessory(kind: .usb, name: "stick", serialNumber: serial, vendorID: "1209", productID: "0001"))
            }
            #expect(try await waitForFleet([lab1], broker: cluster.a).isEmpty, "\(lab1.logTail())")
            let watch = try ChildProcess(
                try Binaries.accmon, ["watch", "--broker", cluster.b.url, "--json"] + cluster.b.cliLogin(),
                name: "watch", directory: cluster.b.directory)
            #expect(await waitFor(#""type":"fleet""#) { watch.stdout }, "\(watch.stderr)")
            #expect(watch.stdout.contains(#""host":"lab-1""#), "the census found lab-1: \(watch.stdout)")

            let plugged = try await connection.simulateConnect(
                Accessory(kind: .usb, name: "probe", serialNumber: "P1", vendorID: "1209", productID: "0042"))
            #expect(await waitFor(#""type":"connect""#) { watch.stdout }, "\(watch.stdout)")
            // The status's count differs from what B shows: the watcher reads lab-1 again (within 2 s), finds nothing.
            #expect(await waitFor(#""type":"unconfirmed""#, timeout: .seconds(10)) { watch.stdout }, "\(watch.stdout)")
            try await Task.sleep(for: .seconds(1))
            #expect(!watch.stdout.contains(#""type":"disconnect""#), "\(watch.stdout)")
            #expect(!watch.stdout.contains(#""state":"unknown""#), "\(watch.stdout)")

            try await connection.simulateDisconnect(plugged)
            #expect(await waitFor(#""type":"disconnect""#) { watch.stdout }, "\(watch.stdout)")
        }

        /// A watcher on node B finds lab-1, whose bridge is on node A only, by the census; A killed with SIGKILL, the
        /// bridge is on no node and its will is lost with A: the watcher shows lab-1 stale once its lease (3 s) ran
        /// out, never online for ever.
        @Test func aHostWhoseNodeDiesIsNotShownOnlineByAWatcherOfTheOtherNode() async throws {
            let cluster = try await EjabberdCluster.start(bridges: ["lab-1"])
            let lab1 = try await BridgedHost.start(name: "lab-1", on: cluster.a, settings: ["statusLeaseSeconds": "3"])
            #expect(try await waitForFleet([lab1], broker: cluster.a).isEmpty, "\(lab1.logTail())")
            let watch = try ChildProcess(
                try Binaries.accmon, ["watch", "--broker", cluster.b.url, "--json"] + cluster.b.cliLogin(),
                name: "watch", directory: cluster.b.directory)
            #expect(await waitFor(#""type":"fleet""#) { watch.stdout }, "\(watch.stderr)")
            #expect(watch.stdout.contains(#""host":"lab-1","state":"online""#), "\(watch.stdout)")
            cluster.a.kill9()
            #expect(
                await waitFor(#""host":"lab-1","state":"stale""#, timeout: .seconds(10)) { watch.stdout },
                "\(watch.stdout)")
        }

        /// lab-1's bridge stopped; an accessory unplugged meanwhile; the bridge started again on node B, which shows it
        /// none of lab-1's topics: it deletes the one it published and no longer holds (the deletion reaches A's index
        /// too), publishes the others again, and says that the broker's view and its own disagree. Then a bridge on
        /// A with both nodes in its list fails over to B when A is killed, and B serves its host whole.
        @Test func aBridgeThatMovesNodesLeavesNoGhostAndFailsOverWhenANodeDies() async throws {
            let cluster = try await EjabberdCluster.start(bridges: ["lab-1", "lab-3"])
            let lab1 = try await BridgedHost.start(name: "lab-1", on: cluster.a)
            let connection = try await lab1.connect()
            defer { connection.close() }
            var random = SplitMix64(seed: SplitMix64.testSeed())
            var plugger = Plugger(connection)
            for _ in 0..<4 { try await plugger.plug(using: &random) }
            #expect(try await waitForFleet([lab1], broker: cluster.a).isEmpty, "\(lab1.logTail())")
            _ = await lab1.stopBridge()
            try await plugger.unplug(using: &random)
            // The same bridge, now on node B.
            let config = try String(contentsOfFile: lab1.configPath, encoding: .utf8)
            try config.replacingOccurrences(of: json(cluster.a.url), with: json(cluster.b.url)).write(
                toFile: lab1.configPath, atomically: true, encoding: .utf8)
            try lab1.startBridge()
            #expect(
                await waitFor("but not 4 that this bridge published and did not delete") { lab1.bridgeLog },
                "\(lab1.logTail())")
            #expect(
                await waitFor("0 retained accessory topics read back, 4 published and not shown, 4 corrected") {
                    lab1.bridgeLog
                }, "\(lab1.logTail())")
            // No ghost through A, the node the bridge left; the fleet whole through B.
            #expect(try await waitForFleet([lab1], broker: cluster.a).isEmpty, "\(lab1.logTail())")
            #expect(try await waitForFleet([lab1], broker: cluster.b).isEmpty, "\(lab1.logTail())")

            // Failover: lab-3 on A, with B next in its list; A killed with SIGKILL.
            let lab3 = try await BridgedHost.start(
                name: "lab-3", on: cluster.a,
                settings: ["broker": "[\(json(cluster.a.url)), \(json(cluster.b.url))]"])
            let lab3Connection = try await lab3.connect()
            defer { lab3Connection.close() }
            var lab3Plugger = Plugger(lab3Connection)
            for _ in 0..<2 { try await lab3Plugger.plug(using: &random) }
            #expect(try await waitForFleet([lab3], broker: cluster.a).isEmpty, "\(lab3.logTail())")
            cluster.a.kill9()
            #expect(await waitFor("trying \(cluster.b.url) at once") { lab3.bridgeLog }, "\(lab3.logTail())")
            #expect(try await waitForFleet([lab3], broker: cluster.b).isEmpty, "\(lab3.logTail())")
            let list = try await run(
                try Binaries.accmon, ["list", "--broker", "\(cluster.a.url),\(cluster.b.url)", "--host", "lab-3"]
                    + cluster.b.cliLogin(), in: cluster.b.directory)
            #expect(list.termination == .exited(0) && list.stdout.contains("lab-3  online"), "\(list)")
        }
    }
}

/// The hosts of a `list --json` output: state and number of accessories, by host name.
func fleetHosts(_ output: String) throws -> [String: (state: String, accessories: Int)] {
    guard let object = try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any] else { return [:] }
    var hosts: [String: (state: String, accessories: Int)] = [:]
    for host in object["hosts"] as? [[String: Any]] ?? [] {
        hosts[host["host"] as? String ?? "?"] = (
            host["state"] as? String ?? "?", (host["accessories"] as? [Any])?.count ?? 0
        )
    }
    return hosts
}
