import AccmonClient
import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// Site brokers bridged to a centre (docs/MQTT.md §11.1): real mosquittos with the documented bridge configuration,
/// passwords and ACLs, real hosts and bridges on each site.
extension BridgeProcessTests {
    @Suite struct Sites {
        static let layout = ["site-a": ["a-1", "a-2"], "site-b": ["b-1", "b-2"]]

        /// Every host plugging and unplugging at random on its site: the centre shows the union of the sites' truths,
        /// every host online; so does each site (the state goes both ways).
        @Test func theCentreShowsTheUnionOfTheSitesTruths() async throws {
            let sites = try await BridgedSites(Self.layout)
            var random = SplitMix64(seed: SplitMix64.testSeed())
            let seeds = sites.hosts.map { _ in random.next() }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (host, seed) in zip(sites.hosts, seeds) {
                    group.addTask { _ = try await host.storm(seed: seed, rounds: 3, steps: 20, target: 12) }
                }
                try await group.waitForAll()
            }
            let centre = try await sites.waitForFleet(on: sites.centre)
            #expect(centre.isEmpty, "\(centre)\n\(sites.logTails)")
            for (name, broker) in sites.sites {
                let difference = try await sites.waitForFleet(on: broker)
                #expect(difference.isEmpty, "\(name): \(difference)")
            }
            let listed = try await run(
                try Binaries.accmon, ["list", "--json"] + sites.login(sites.centre, as: "qa"), in: sites.directory)
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any])
            let hosts = try #require(object["hosts"] as? [[String: Any]], "\(listed)")
            #expect(hosts.map { $0["host"] as? String } == ["a-1", "a-2", "b-1", "b-2"], "\(listed)")
            #expect(hosts.allSatisfy { $0["state"] as? String == "online" }, "\(listed)")

            // One publication crosses each link once: one copy at each broker, none sent back.
            var subscribers: [String: ChildProcess] = [:]
            let brokers = sites.sites.merging(["centre": sites.centre]) { first, _ in first }
            for (name, broker) in brokers {
                subscribers[name] = try ChildProcess(
                    URL(fileURLWithPath: "/usr/bin/mosquitto_sub"),
                    [
                        "-p", String(broker.port), "-u", "qa", "-P", "pw-qa", "-t", "accmon/a-1/accessories/#",
                        "-R", "-F", "%t", "-W", "3",
                    ], name: "copies-\(name)", directory: sites.directory)
            }
            try await Task.sleep(for: .milliseconds(500))  // subscribed
            let connection = try await sites.host("a-1").connect()
            defer { connection.close() }
            let once = try await connection.simulateConnect(Accessory(kind: .usb, name: "once", serialNumber: "O1"))
            for (name, subscriber) in subscribers {
                _ = await subscriber.waitForExit(timeout: .seconds(10))
                let copies = subscriber.stdout.split(separator: "\n").filter { $0.hasSuffix("/\(once.rawValue)") }
                #expect(copies.count == 1, "\(name): \(subscriber.stdout) \(subscriber.stderr)")
            }
        }

        /// A site broker killed with SIGKILL: its hosts are no longer online at the centre once their statuses'
        /// leases (3 s here) run out (a watcher of the centre shows them stale, a fresh read unknown); the other
        /// site's hosts stay online. The hosts change meanwhile; when the site broker is back, the centre shows them
        /// online again with what changed.
        @Test func aSiteBrokerKilledIsNotOnlineAtTheCentreAndComesBackWithWhatChanged() async throws {
            let sites = try await BridgedSites(Self.layout, hostSettings: ["statusLeaseSeconds": "3"])
            for host in sites.hosts { _ = try await host.storm(seed: SplitMix64.testSeed(), steps: 10, target: 6) }
            #expect(try await sites.waitForFleet(on: sites.centre).isEmpty, "\(sites.logTails)")
            let watch = try ChildProcess(
                try Binaries.accmon, ["watch", "--json"] + sites.login(sites.centre, as: "qa"), name: "watch",
                directory: sites.directory)
            #expect(await waitFor(#""type":"fleet""#) { watch.stdout })

            let siteA = sites.sites["site-a"]!
            siteA.kill9()
            for name in ["a-1", "a-2"] {
                #expect(
                    await waitFor(#"{"host":"\#(name)","state":"stale""#, timeout: .seconds(10)) { watch.stdout },
                    "\(watch.stdout)\n\(watch.stderr)")
            }
            let listed = try await run(
                try Binaries.accmon, ["list", "--json"] + sites.login(sites.centre, as: "qa"), in: sites.directory)
            let object = try #require(
                try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? [String: Any])
            let states = (object["hosts"] as? [[String: Any]] ?? []).map {
                "\($0["host"] as? String ?? "?") \($0["state"] as? String ?? "?")"
            }
            #expect(states == ["a-1 unknown", "a-2 unknown", "b-1 online", "b-2 online"], "\(listed)")
            #expect(!watch.stdout.contains(#"{"host":"b-1","state":"stale""#), "the other site's hosts renew")

            // While their broker is away, the site's hosts change: accmond holds the events for their bridges.
            let changed = try await sites.host("a-1").storm(seed: SplitMix64.testSeed() &+ 1, steps: 10, target: 6)
            try await siteA.restart()
            let difference = try await sites.waitForFleet(on: sites.centre, timeout: .seconds(40))
            #expect(difference.isEmpty, "\(difference)\n\(sites.logTails)")
            #expect(changed > 0)
            var truths: [String: Set<UInt64>] = [:]
            for host in sites.hosts { truths[host.name] = Set(try await host.truth().keys) }
            #expect(await eventuallyHolds { watchView(watch.stdout) == truths }, "\(watch.stderr)")
            #expect(watch.stdout.contains(#"{"host":"a-1","state":"online""#), "\(watch.stdout)")
        }

        /// A deletion the killed site took but never forwarded (its link to the centre held what it sent, and lost
        /// it with the site) stays at the centre until the site is back; then the centre's copy comes back to the
        /// site, the host's bridge finds it and deletes it, and the deletion reaches the centre: no ghost.
        @Test func aDeletionTheKilledSiteNeverForwardedLeavesNoGhostAtTheCentre() async throws {
            let sites = try await BridgedSites(["site-a": ["a-1"], "site-b": ["b-1"]], proxied: ["site-a"])
            let host = sites.host("a-1")
            let connection = try await host.connect()
            defer { connection.close() }
            let kept = try await connection.simulateConnect(Accessory(kind: .usb, name: "kept", serialNumber: "K1"))
            let gone = try await connection.simulateConnect(Accessory(kind: .usb, name: "gone", serialNumber: "G1"))
            #expect(try await sites.waitForFleet(on: sites.centre).isEmpty, "\(sites.logTails)")

            let siteA = sites.sites["site-a"]!
            let link = sites.links["site-a"]!
            link.holdClientBytes()
            try await connection.simulateDisconnect(gone)
            // The site took the deletion (its own readers see it); the centre never gets it.
            #expect(
                await eventuallyHolds {
                    let read = try? await fleetState(siteA, settings: try sites.settings(siteA))
                    return read?.hosts["a-1"]?.accessories.keys.sorted() == [kept.rawValue]
                })
            siteA.kill9()
            link.dropConnections()
            let ghost = try await fleetState(sites.centre, settings: try sites.settings(sites.centre))
            #expect(ghost.hosts["a-1"]?.accessories[gone.rawValue] != nil, "the centre still holds the deleted one")

            try await siteA.restart()
            let difference = try await sites.waitForFleet(on: sites.centre, timeout: .seconds(40))
            #expect(difference.isEmpty, "\(difference)\n\(sites.logTails)")
        }

        /// The centre killed with SIGKILL and started again empty: the sites' links refill it.
        @Test func theCentreKilledComesBackWithTheSitesState() async throws {
            let sites = try await BridgedSites(["site-a": ["a-1"], "site-b": ["b-1"]])
            for host in sites.hosts { _ = try await host.storm(seed: SplitMix64.testSeed(), steps: 10, target: 6) }
            #expect(try await sites.waitForFleet(on: sites.centre).isEmpty, "\(sites.logTails)")
            sites.centre.kill9()
            for host in sites.hosts { _ = try await host.storm(seed: SplitMix64.testSeed() &+ 2, steps: 6, target: 6) }
            try await sites.centre.restart()
            let difference = try await sites.waitForFleet(on: sites.centre, timeout: .seconds(40))
            #expect(difference.isEmpty, "\(difference)\n\(sites.logTails)")
        }

        /// Claims across the sites, through the centre: a claimer on the centre claims an accessory of a host of site
        /// A, one on site B is told who holds it and where, then claims it once it is released.
        @Test func aClaimerOnTheCentreAndOneOnTheOtherSiteClaimAHostOfASite() async throws {
            let sites = try await BridgedSites(["site-a": ["a-1"], "site-b": ["b-1"]])
            let board = try await RemoteClaims.plug("S1", on: sites.host("a-1"))
            for host in sites.hosts { #expect(await waitFor("taking requests") { host.bridgeLog }) }
            let siteB = sites.sites["site-b"]!
            for broker in [sites.centre, siteB] {
                #expect(
                    await eventuallyHolds {
                        let read = try? await fleetState(broker, settings: try sites.settings(broker))
                        return read?.hosts["a-1"]?.accessories[board.rawValue] != nil
                    })
            }
            let marker = sites.directory.file("ran")
            let command = [
                "--serial", "S1", "--", "sh", "-c", "echo \"$ACCMON_CLAIM_HOST $ACCMON_CLAIM_CONNECTIONS\" > \(marker)",
            ]
            let fromCentre = try await run(
                try Binaries.accmon, ["claim"] + sites.login(sites.centre, as: "ci") + command, in: sites.directory,
                timeout: .seconds(60))
            #expect(fromCentre.termination == .exited(0), "\(fromCentre)\n\(sites.logTails)")
            #expect((try? String(contentsOfFile: marker, encoding: .utf8)) == "a-1 \(board.rawValue)\n")

            // ci holds it from the centre; qa asks from site B: held, by whom and where.
            let ci = try RemoteClaimClient(
                settings: sites.settings(sites.centre, as: "ci"), topics: FleetTopics(prefix: "accmon"),
                clientID: "claimer-ci-\(UInt32.random(in: 0...UInt32.max))")
            defer { ci.disconnect() }
            let held = try #require(try ci.ask(RemoteClaims.byFilter("S1"), host: "a-1"), "\(sites.logTails)")
            try #require(held.kind == .held, "\(held)")
            let refused = try await run(
                try Binaries.accmon, ["claim"] + sites.login(siteB, as: "qa") + ["--serial", "S1", "--", "true"],
                in: sites.directory, timeout: .seconds(60))
            #expect(refused.termination == .exited(75), "\(refused)")
            #expect(refused.stderr.contains("ci (remote)") && refused.stderr.contains("on a-1"), "\(refused)")
            _ = try ci.ask(RemoteClaimRequest(op: .release, nonce: "", claimIDs: [held.claimID!]), host: "a-1")
            try FileManager.default.removeItem(atPath: marker)
            let fromSiteB = try await run(
                try Binaries.accmon, ["claim"] + sites.login(siteB, as: "qa") + command, in: sites.directory,
                timeout: .seconds(60))
            #expect(fromSiteB.termination == .exited(0), "\(fromSiteB)\n\(sites.logTails)")
            #expect((try? String(contentsOfFile: marker, encoding: .utf8)) == "a-1 \(board.rawValue)\n")
            #expect(try await sites.host("a-1").accmon(["claims"]).stdout == "no claims\n")
        }
    }
}
