import AccmonClient
import AccmonMQTT
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// The holders of claims in the fleet view (`accmon watch --broker --json`, `accmon list --broker`), read from the
/// retained claim topics a real bridge publishes, through a real mosquitto with the ACL of docs/MQTT.md §12.2.
extension BridgeProcessTests {
    @Suite struct FleetClaimView {
        typealias Object = [String: Any]

        /// The JSON objects of a transcript's lines.
        static func lines(_ text: String) -> [Object] {
            text.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? Object  // try?: a partial last line
            }
        }

        /// The accessory of connection `connection` on `host` in a `fleet` line or a `list --json` document.
        static func accessory(_ document: Object?, host: String, connection: ConnectionID) -> Object? {
            let hosts = document?["hosts"] as? [Object] ?? []
            let accessories = hosts.first { $0["host"] as? String == host }?["accessories"] as? [Object] ?? []
            return accessories.first { ($0["connectionID"] as? NSNumber)?.uint64Value == connection.rawValue }
        }

        /// The holder's user name of an accessory object's `claim`, `nil` when it has none.
        static func holder(_ accessory: Object?) -> String? {
            ((accessory?["claim"] as? Object)?["holder"] as? Object)?["user"] as? String
        }

        /// The `connect` and `disconnect` lines of connection `connection` after the first line, as
        /// `(type, holder or "-")`.
        static func changes(_ text: String, connection: ConnectionID) -> [String] {
            lines(text).dropFirst().compactMap { line in
                guard let type = line["type"] as? String, type == "connect" || type == "disconnect",
                    let accessory = line["accessory"] as? Object,
                    (accessory["connectionID"] as? NSNumber)?.uint64Value == connection.rawValue
                else { return nil }
                return "\(type) \(holder(accessory) ?? "-")"
            }
        }

        @Test func theFleetViewShowsEachHolderAndFollowsTheClaimsChanges() async throws {
            let fleet = try await ClaimFleet(hosts: ["lab-1", "lab-2"])
            let board = try await RemoteClaims.plug("V1", on: fleet.hosts[0])
            let other = try await RemoteClaims.plug("V2", on: fleet.hosts[1])
            #expect(await fleet.waitUntilTakingRequests())
            #expect(await fleet.waitUntilPublished(["V1", "V2"]))
            let ci = try fleet.claimer("ci")
            let held = try #require(try ci.ask(RemoteClaims.byFilter("V1"), host: "lab-1"))
            try #require(held.kind == .held, "\(held)")
            let claimID = try #require(held.claimID)
            #expect(await eventuallyHolds { (try? ci.readClaims(timeout: 0.3))?.count == 1 })

            // Two watchers: every host (its claims followed through one subscription of every host's claim topics),
            // and `--host` with a wildcard (through the subscriptions of the hosts it reads).
            let everyHost = try ChildProcess(
                try Binaries.accmon, ["watch", "--json"] + (try fleet.login("qa")), name: "watch-all",
                directory: fleet.directory)
            let selected = try ChildProcess(
                try Binaries.accmon, ["watch", "--json", "--host", "lab-1*"] + (try fleet.login("qa")),
                name: "watch-lab-1", directory: fleet.directory)
            let human = try ChildProcess(
                try Binaries.accmon, ["watch"] + (try fleet.login("qa")), name: "watch-human",
                directory: fleet.directory)
            for watch in [everyHost, selected] {
                #expect(await waitFor(#""type":"fleet""#) { watch.stdout }, "\(watch.stderr)")
                let first = Self.lines(watch.stdout).first
                let claimed = Self.accessory(first, host: "lab-1", connection: board)
                #expect(Self.holder(claimed) == "ci", "\(watch.stdout)")
                let claim = claimed?["claim"] as? Object
                #expect(claim?["claimID"] as? String == claimID && claim?["reason"] as? String == "test")
                #expect((claim?["holder"] as? Object)?["remote"] as? Bool == true)
                #expect(claim?["waiting"] as? Int == 0 && claim?["since"] is NSNumber, "\(String(describing: claim))")
                if watch === everyHost {
                    let free = Self.accessory(first, host: "lab-2", connection: other)
                    #expect(free != nil && free?["claim"] == nil, "\(watch.stdout)")
                }
            }
            // The human watcher's first state too, before anything changes: it started beside the others, and a
            // release that came before its first read would show the accessory free from the start.
            #expect(await waitFor("claimed by ci (remote)") { human.stdout }, "\(human.stdout)\(human.stderr)")

            // Released: the accessory's object without its claim, the old one gone first.
            let released = try ci.ask(RemoteClaimRequest(op: .release, nonce: "", claimIDs: [claimID]), host: "lab-1")
            #expect(released?.kind == .released, "\(String(describing: released))")
            for watch in [everyHost, selected] {
                #expect(
                    await eventuallyHolds { Self.changes(watch.stdout, connection: board).count >= 2 },
                    "\(watch.stdout)\(watch.stderr)")
                #expect(Self.changes(watch.stdout, connection: board) == ["disconnect ci", "connect -"])
            }

            // Taken by another user: the object with the new holder.
            let qa = try fleet.claimer("qa")
            let taken = try #require(try qa.ask(RemoteClaims.byFilter("V1"), host: "lab-1"))
            try #require(taken.kind == .held, "\(taken)")
            for watch in [everyHost, selected] {
                #expect(
                    await eventuallyHolds { Self.changes(watch.stdout, connection: board).count >= 4 },
                    "\(watch.stdout)\(watch.stderr)")
                let changes = Self.changes(watch.stdout, connection: board)
                #expect(changes == ["disconnect ci", "connect -", "disconnect -", "connect qa"], "\(watch.stdout)")
                // Each pair came in one write: adjacent lines of the transcript.
                let lines = watch.stdout.split(separator: "\n")
                let pairs = zip(lines, lines.dropFirst()).filter {
                    $0.0.contains(#""type":"disconnect""#) && $0.1.contains(#""type":"connect""#)
                }
                #expect(pairs.count == 2, "\(watch.stdout)")
            }
            #expect(everyHost.isRunning && selected.isRunning)
            // Without --json: the holder on the `present` line, then one `claimed` or `released` line per change.
            #expect(await waitFor("by qa (remote)") { human.stdout }, "\(human.stdout)\(human.stderr)")
            let boardLines = human.stdout.split(separator: "\n").filter {
                $0.contains("lab-1") && $0.contains("conn=\(board)")
            }
            #expect(boardLines.count == 3, "\(human.stdout)")
            #expect(
                boardLines.first?.contains("present") == true
                    && boardLines.first?.contains("claimed by ci (remote)") == true)
            #expect(boardLines.dropFirst().first?.contains("released") == true, "\(human.stdout)")
            #expect(
                boardLines.last?.contains("claimed") == true && boardLines.last?.contains("by qa (remote)") == true
                    && boardLines.last?.contains(": test") == true)

            // `list --broker --json`: the holder on the accessory's object, for every host and for one.
            for selection in [[], ["--host", "lab-1"]] {
                let listed = try await RemoteClaimCommands.accmon(
                    ["list", "--json"] + selection + (try fleet.login("ci")), in: fleet)
                #expect(listed.termination == .exited(0), "\(listed)")
                let document = try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? Object
                #expect(Self.holder(Self.accessory(document, host: "lab-1", connection: board)) == "qa", "\(listed)")
                if selection.isEmpty {
                    #expect(Self.accessory(document, host: "lab-2", connection: other)?["claim"] == nil)
                }
            }
            let table = try await RemoteClaimCommands.accmon(["list"] + (try fleet.login("ci")), in: fleet)
            let row = table.stdout.split(separator: "\n").first { $0.contains("V1") }.map(String.init) ?? ""
            #expect(row.hasPrefix("lab-1") && row.hasSuffix("qa (remote)"), "\(table)")
        }

        /// A synthetic fleet whose every accessory is claimed, with the bridge's claim payloads, read through
        /// windows bigger than the broker's queue (50): a host's status, accessory and claim topics are more packets
        /// than `--broker-queue`, so no window is whole by its packets, and its status counts only its accessory
        /// topics; the claim topics are read again in windows of their own. Every claim is shown, and `list` exits 0
        /// without a warning.
        @Test func everyClaimIsShownThroughWindowsBiggerThanTheBrokersQueue() async throws {
            let broker = try await FleetScale.smallQueueBroker()
            let fleet = SyntheticFleet(hosts: 20, accessories: 30)
            try await publishRetained(fleet.messages + Self.everyAccessoryClaimed(fleet), to: broker)
            let listed = try await run(
                try Binaries.accmon, ["list", "--broker", broker.url, "--json", "--broker-queue", "50"],
                in: broker.directory, timeout: .seconds(120))
            #expect(listed.termination == .exited(0) && listed.stderr.isEmpty, "\(listed.stderr)")
            let document = try JSONSerialization.jsonObject(with: Data(listed.stdout.utf8)) as? Object
            var missing: [String] = []
            for host in 0..<fleet.hosts {
                for index in 0..<fleet.accessories {
                    let accessory = Self.accessory(
                        document, host: SyntheticFleet.name(host),
                        connection: SyntheticFleet.accessory(host: host, index).connectionID)
                    if Self.holder(accessory) != "user-\(host)-\(index)" { missing.append("\(host)/\(index)") }
                }
            }
            #expect(missing.isEmpty, "\(missing.count) claims not shown: \(missing.prefix(10))")
        }

        /// `accmon claims --broker` reads the claims in the fleet view's windows and only the hosts `--host` selects:
        /// through windows bigger than the broker's queue (50) every claim of the fleet is listed with its holder;
        /// with a glob, the matching hosts' claims; with one host's name, the broker sends the reader no topic of any
        /// other host (its debug log names every PUBLISH it sends). `accmon claim --broker --host` looks for its
        /// candidates the same way.
        @Test func theClaimsCommandReadsOnlyTheHostsAskedForInWindows() async throws {
            let broker = try await Mosquitto.start(
                Mosquitto.Options(settings: ["max_queued_messages 50", "log_type debug"]))
            let fleet = SyntheticFleet(hosts: 20, accessories: 30)
            try await publishRetained(fleet.messages + Self.everyAccessoryClaimed(fleet), to: broker)
            struct Listed: Decodable {
                struct Row: Decodable { var host: String; var claim: RemoteClaimState }
                var claims: [Row]
            }
            func listed(_ options: [String]) async throws -> [String] {
                let result = try await run(
                    try Binaries.accmon,
                    ["claims", "--broker", broker.url, "--json", "--broker-queue", "50"] + options,
                    in: broker.directory, timeout: .seconds(120))
                #expect(result.termination == .exited(0) && result.stderr.isEmpty, "\(result.stderr)")
                return try JSONDecoder().decode(Listed.self, from: Data(result.stdout.utf8)).claims.map {
                    "\($0.host)/\($0.claim.connectionID)/\($0.claim.holder.user)"
                }
            }
            func expected(_ hosts: some Sequence<Int>) -> Set<String> {
                Set(
                    hosts.flatMap { host in
                        (0..<fleet.accessories).map { index in
                            let connection = SyntheticFleet.accessory(host: host, index).connectionID.rawValue
                            return "\(SyntheticFleet.name(host))/\(connection)/user-\(host)-\(index)"
                        }
                    })
            }
            let every = try await listed([])
            #expect(every.count == 600 && Set(every) == expected(0..<fleet.hosts))
            let glob = try await listed(["--host", "lab-0001?"])
            #expect(Set(glob) == expected(10..<20) && glob.count == 300)
            let before = broker.log.count
            let one = try await listed(["--host", SyntheticFleet.name(7)])
            #expect(Set(one) == expected([7]) && one.count == 30)
            let sent = broker.log.dropFirst(before).split(separator: "\n").filter {
                $0.contains("Sending PUBLISH to accmon-") && $0.contains("'accmon/lab-")
            }
            let others = sent.filter { !$0.contains("'accmon/\(SyntheticFleet.name(7))/") }
            #expect(!sent.isEmpty && others.isEmpty, "\(others.prefix(5))")
            // `accmon claim --broker --host` finds its candidates the same way: that host's topics alone.
            let beforeClaim = broker.log.count
            let claimed = try await run(
                try Binaries.accmon,
                [
                    "claim", "--broker", broker.url, "--username", "ci", "--broker-queue", "50", "--host",
                    SyntheticFleet.name(7), "--serial", "none-such", "--", "true",
                ],
                in: broker.directory, timeout: .seconds(60))
            #expect(claimed.termination == .exited(1), "\(claimed)")
            #expect(claimed.stderr.contains("no online host has 1 matching accessories"), "\(claimed.stderr)")
            let claimSent = broker.log.dropFirst(beforeClaim).split(separator: "\n").filter {
                $0.contains("Sending PUBLISH to accmon-") && $0.contains("'accmon/lab-")
            }
            let claimOthers = claimSent.filter { !$0.contains("'accmon/\(SyntheticFleet.name(7))/") }
            #expect(!claimSent.isEmpty && claimOthers.isEmpty, "\(claimOthers.prefix(5))")
        }

        /// A claim on every accessory of a synthetic fleet, accessory `index` of host `host` held by
        /// `user-<host>-<index>`.
        static func everyAccessoryClaimed(_ fleet: SyntheticFleet) throws -> [(topic: String, payload: [UInt8])] {
            try (0..<fleet.hosts).flatMap { host in
                try (0..<fleet.accessories).map { index in
                    try claimMessage(fleet, host: host, index, holder: "user-\(host)-\(index)")
                }
            }
        }

        /// The retained claim payload the bridge publishes for accessory `index` of a synthetic host.
        static func claimMessage(
            _ fleet: SyntheticFleet, host: Int, _ index: Int, holder: String, reason: String = "bench"
        ) throws -> (topic: String, payload: [UInt8]) {
            let accessory = SyntheticFleet.accessory(host: host, index)
            let summary = ClaimSummary(
                claimID: "c-\(index)", holder: Party(user: holder, remote: true), since: 1, reason: reason,
                waiting: 0, connections: [accessory.connectionID], accessoryIDs: [accessory.accessoryID])
            let state = RemoteClaimState(
                host: SyntheticFleet.name(host), accessoryID: accessory.accessoryID,
                connectionID: accessory.connectionID.rawValue, summary: summary)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            return (
                fleet.topics.claim(host: state.host, accessoryID: state.accessoryID, connectionID: state.connectionID),
                Array(try encoder.encode(state))
            )
        }

        /// The holder of each accessory a watcher shows after the lines it printed (host → connection → holder or
        /// "-").
        static func watchedHolders(_ output: String) -> [String: [UInt64: String]] {
            var shown: [String: [UInt64: String]] = [:]
            for line in lines(output) {
                switch line["type"] as? String {
                case "fleet":
                    shown = [:]
                    for host in line["hosts"] as? [Object] ?? [] {
                        guard let name = host["host"] as? String else { continue }
                        for accessory in host["accessories"] as? [Object] ?? [] {
                            guard let connection = (accessory["connectionID"] as? NSNumber)?.uint64Value else {
                                continue
                            }
                            shown[name, default: [:]][connection] = holder(accessory) ?? "-"
                        }
                    }
                case "connect", "disconnect":
                    guard let name = line["host"] as? String, let accessory = line["accessory"] as? Object,
                        let connection = (accessory["connectionID"] as? NSNumber)?.uint64Value
                    else { continue }
                    shown[name, default: [:]][connection] =
                        line["type"] as? String == "connect"
                        ? holder(accessory) ?? "-" : nil
                default: continue
                }
            }
            return shown
        }

        /// A watcher whose claim changes the broker drops (a burst of 3,600 of 2 KB over 400 hosts through a queue of
        /// 100): no count tells a dropped claim topic, but the end markers kept going after changes do; the watcher
        /// then reads every host's claim topics again and shows the last holder of each accessory.
        @Test func aWatcherWhoseClaimChangesTheBrokerDropsReadsTheClaimsAgain() async throws {
            let (broker, fleet, watch) = try await FleetScale.watcherOfABigFleet()
            defer { watch.kill() }
            var burst: [(topic: String, payload: [UInt8])] = []
            var truth: [String: [UInt64: String]] = [:]
            // Long reasons (2 KB): more than the sockets hold, so that the broker holds a queue's worth unsent.
            let reason = String(repeating: "flashing ", count: 228)
            for round in 0..<3 {
                for host in 0..<fleet.hosts {
                    for index in 0..<fleet.accessories {
                        let holder = "user-\(round)-\(host)-\(index)"
                        burst.append(try Self.claimMessage(fleet, host: host, index, holder: holder, reason: reason))
                        truth[SyntheticFleet.name(host), default: [:]][UInt64(index + 1)] = holder
                    }
                }
            }
            try await publishRetained(burst, to: broker)
            var differing = 0
            let converged = await eventuallyHolds(timeout: .seconds(60)) {
                let shown = Self.watchedHolders(watch.stdout)
                differing = truth.filter { shown[$0.key] != $0.value }.count
                return differing == 0
            }
            let dropped = broker.log.contains("Outgoing messages are being dropped for client accmon-cli")
            #expect(converged, "\(differing) hosts show another holder; dropped: \(dropped)\n\(watch.stderr)")
            print("fleet claims: the broker dropped claim changes for the watcher: \(dropped)")
        }
    }
}
