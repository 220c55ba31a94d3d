import AccmonClient
import AccmonProtocol
import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// The manifest enforced by the real daemon, with clients running as real different users (root and `nobody`).
@Suite(.serialized) struct ManifestEnforcementTests {
    /// A daemon whose manifest the test writes (and rewrites), reachable by `nobody`.
    final class Setup: Sendable {
        let directory: TemporaryDirectory
        let socketPath: String
        let manifestPath: String
        let daemon: ChildProcess

        init(manifest: String) async throws {
            directory = try TemporaryDirectory()
            socketPath = directory.file("s")
            manifestPath = directory.file("manifest.json")
            try manifest.write(toFile: manifestPath, atomically: true, encoding: .utf8)
            daemon = try ChildProcess(
                try Binaries.accmond,
                [
                    "--socket", socketPath, "--simulate", "--no-udev", "--state-dir", directory.file("state"),
                    "--manifest", manifestPath, "--manifest-dir", directory.file("manifest.d"),
                ], name: "accmond", directory: directory)
            // Up once it answers: the socket accepts (into its backlog) before the manifest is read, and the tests
            // rewrite the manifest right after.
            let up = await eventually {
                guard let connection = try? await AccmonConnection.connect(socketPath: socketPath, clientName: "probe")
                else { return false }  // try?: not listening yet
                defer { connection.close() }
                return (try? await connection.status()) != nil  // try?: not serving yet
            }
            try #require(up, "accmond did not start: \(daemon.stderr)")
            chmod(directory.path, 0o755)
            chmod(socketPath, 0o666)
        }

        func rewrite(_ manifest: String) throws {
            try manifest.write(toFile: manifestPath, atomically: true, encoding: .utf8)
        }

        /// Runs `accmon` as root or as nobody.
        func accmon(_ arguments: [String], asNobody: Bool) async throws -> CommandResult {
            let accmon = try Binaries.accmon.path
            if asNobody {
                return try await run(
                    URL(fileURLWithPath: "/usr/bin/setpriv"),
                    ["--reuid=65534", "--regid=65534", "--clear-groups", accmon, "--socket", socketPath] + arguments,
                    in: directory)
            }
            return try await run(URL(fileURLWithPath: accmon), ["--socket", socketPath] + arguments, in: directory)
        }

        func startWatch(asNobody: Bool, name: String) throws -> ChildProcess {
            let accmon = try Binaries.accmon.path
            return try ChildProcess(
                URL(fileURLWithPath: "/usr/bin/setpriv"),
                (asNobody ? ["--reuid=65534", "--regid=65534", "--clear-groups"] : ["--reuid=0"])
                    + [accmon, "--socket", socketPath, "watch", "--json"], name: name, directory: directory)
        }

        deinit { daemon.kill() }
    }

    static let usbForNobody = #"""
        {"version": 1, "accessories": [
          {"name": "usb", "match": {"kind": "usb", "id": "*:*"}, "protocols": ["com.example.usb"],
           "access": {"users": ["nobody", "root"]}},
          {"name": "serial", "match": {"kind": "serial", "id": "*:*"}},
        ]}
        """#
    static let serialForNobody = #"""
        {"version": 1, "accessories": [
          {"name": "usb", "match": {"kind": "usb", "id": "*:*"}},
          {"name": "serial", "match": {"kind": "serial", "id": "*:*"}, "access": {"users": [65534]}},
        ]}
        """#

    @Test func aUserNotAllowedSeesNothingAndCannotDoAdminOperations() async throws {
        let setup = try await Setup(manifest: Self.serialForNobody)
        let plugged = try await setup.accmon(
            ["simulate", "connect", "--kind", "usb", "--vendor", "1209"], asNobody: false)
        #expect(plugged.termination == .exited(0), "\(plugged)")

        let asRoot = try await setup.accmon(["list", "--json"], asNobody: false)
        #expect(asRoot.stdout.contains("\"1209\""), "root (in every default access list) sees it: \(asRoot)")
        let asNobody = try await setup.accmon(["list", "--json"], asNobody: true)
        #expect(asNobody.termination == .exited(0), "\(asNobody)")
        #expect(
            jsonObject(asNobody.stdout)?["accessories"] as? [Any] == nil
                || (jsonObject(asNobody.stdout)?["accessories"] as? [Any])?.isEmpty == true, "\(asNobody)")

        for arguments in [
            ["simulate", "connect", "--kind", "serial"], ["watch", "--all"], ["manifest", "reload"], ["list", "--all"],
        ] {
            let refused = try await setup.accmon(arguments, asNobody: true)
            #expect(refused.termination == .exited(77), "\(arguments): \(refused)")
            #expect(refused.stderr.contains("permission-denied") && refused.stderr.contains("uid 65534"), "\(refused)")
        }
        // Status shows nobody only its own sessions.
        let status = try await setup.accmon(["status", "--json"], asNobody: true)
        let clients = (jsonObject(status.stdout)?["status"] as? [String: Any])?["clients"] as? [[String: Any]] ?? []
        #expect(!clients.isEmpty && clients.allSatisfy { ($0["uid"] as? NSNumber)?.intValue == 65534 }, "\(status)")
    }

    /// An allowed accessory carries its entry's protocol strings, then those it reported that the entry lacks; a
    /// rejected one carries none: in events and in snapshots alike.
    @Test func accessoriesCarryTheirEntrysProtocolStrings() async throws {
        let setup = try await Setup(
            manifest: #"""
                {"version": 1, "accessories": [
                  {"name": "bench", "match": {"id": "1209:*"}, "protocols": ["com.example.a", "com.example.b"]}]}
                """#)
        let watch = try ChildProcess(
            try Binaries.accmon, ["--socket", setup.socketPath, "watch", "--json", "--all"], name: "watch",
            directory: setup.directory)
        #expect(await eventually { watch.stdout.contains("\"snapshot\"") })
        for arguments in [
            ["--vendor", "1209", "--product", "0001", "--protocol", "com.example.b", "--protocol", "com.example.own"],
            ["--vendor", "1209", "--product", "0002"],
            ["--vendor", "dead", "--product", "0003", "--protocol", "com.example.own"],
        ] {
            let plugged = try await setup.accmon(["simulate", "connect", "--kind", "usb"] + arguments, asNobody: false)
            #expect(plugged.termination == .exited(0), "\(plugged)")
        }
        let expected = [
            "0001": ["com.example.a", "com.example.b", "com.example.own"], "0002": ["com.example.a", "com.example.b"],
            "0003": [],
        ]
        /// Each accessory's protocol strings by product id.
        func protocolStrings(_ accessories: [[String: Any]]) -> [String: [String]] {
            Dictionary(
                accessories.map { ($0["productID"] as? String ?? "?", $0["protocolStrings"] as? [String] ?? ["?"]) },
                uniquingKeysWith: { first, _ in first })
        }
        func connected() -> [[String: Any]] {
            watch.stdout.split(separator: "\n").compactMap { jsonObject(String($0)) }
                .filter { $0["type"] as? String == "connect" }.compactMap { $0["accessory"] as? [String: Any] }
        }
        #expect(await eventually { connected().count >= 3 }, "\(watch.stdout)")
        #expect(connected().count == 3, "one connect event each: \(watch.stdout)")
        #expect(protocolStrings(connected()) == expected, "\(watch.stdout)")
        let listed = try await setup.accmon(["list", "--json", "--all"], asNobody: false)
        let snapshot = jsonObject(listed.stdout)?["accessories"] as? [[String: Any]] ?? []
        #expect(protocolStrings(snapshot) == expected, "\(listed)")
    }

    @Test func rejectedAccessoriesAreLoggedAndShownToAdminsOnly() async throws {
        let setup = try await Setup(
            manifest: #"{"version": 1, "accessories": [{"name": "ftdi", "match": {"id": "0403:*"}}]}"#)
        let watch = try setup.startWatch(asNobody: false, name: "admin-watch")
        _ = watch  // root's plain watch: rejected accessories never reach it
        let all = try ChildProcess(
            try Binaries.accmon, ["--socket", setup.socketPath, "watch", "--json", "--all"], name: "all",
            directory: setup.directory)
        #expect(await eventually { all.stdout.contains("\"snapshot\"") && watch.stdout.contains("\"snapshot\"") })
        _ = try await setup.accmon(
            ["simulate", "connect", "--kind", "usb", "--vendor", "dead", "--product", "beef"], asNobody: false)
        _ = try await setup.accmon(
            ["simulate", "connect", "--kind", "serial", "--vendor", "0403", "--product", "6001"], asNobody: false)
        #expect(await eventually { all.stdout.components(separatedBy: "\"connect\"").count == 3 })
        #expect(await eventually { watch.stdout.contains("\"0403\"") })
        #expect(all.stdout.contains("\"rejected\":\"no manifest entry matches"), "\(all.stdout)")
        #expect(!watch.stdout.contains("dead"), "a rejected accessory reached an ordinary subscription")
        #expect(setup.daemon.stderr.contains("accessory rejected: no manifest entry matches"), "\(setup.daemon.stderr)")
        let listed = try await setup.accmon(["list", "--all"], asNobody: false)
        #expect(listed.stdout.contains("rejected: no manifest entry matches") && listed.stdout.contains("allowed"))
    }

    @Test func aBrokenManifestIsRefusedAndThePreviousStaysInForce() async throws {
        let setup = try await Setup(manifest: Self.usbForNobody)
        try setup.rewrite(
            "{\"version\": 1, \"accessories\": [\n  {\"name\": \"x\", \"match\": {\"id\": \"04x3:*\"}},\n]}")
        let reload = try await setup.accmon(["manifest", "reload"], asNobody: false)
        #expect(reload.termination == .exited(65), "\(reload)")
        #expect(reload.stderr.contains("manifest.json:2:"), "the problem names file:line:column: \(reload)")
        let status = try await setup.accmon(["status", "--json"], asNobody: false)
        let manifest = (jsonObject(status.stdout)?["status"] as? [String: Any])?["manifest"] as? [String: Any]
        #expect((manifest?["entries"] as? NSNumber)?.intValue == 2, "the old manifest stays: \(status)")
        #expect(((manifest?["lastFailure"] as? [String]) ?? []).first?.contains("manifest.json:2:") == true)
        // The old manifest still decides: nobody sees a usb accessory.
        _ = try await setup.accmon(["simulate", "connect", "--kind", "usb", "--vendor", "1209"], asNobody: false)
        let seen = try await setup.accmon(["list", "--json"], asNobody: true)
        #expect(seen.stdout.contains("\"1209\""), "\(seen)")
        // SIGHUP reloads too: a fixed manifest is taken.
        try setup.rewrite(Self.serialForNobody)
        setup.daemon.send(SIGHUP)
        #expect(
            try await eventually {
                let listed = try await setup.accmon(["list", "--json"], asNobody: true)
                return listed.termination == .exited(0) && !listed.stdout.contains("\"1209\"")
            }, "after SIGHUP, nobody no longer sees the usb accessory")
        #expect(setup.daemon.isRunning, "SIGHUP must reload, not stop the daemon: \(setup.daemon.stderr)")
        #expect(setup.daemon.stderr.contains("received SIGHUP; reloading the manifest"))
    }

    /// Reloads that move accessories in and out of a user's sight while a storm runs: the user's watch never sees a
    /// repeated, impossible or missing transition, and ends with exactly what it may see.
    @Test func reloadsDuringAStormChangeVisibilityCleanly() async throws {
        let setup = try await Setup(manifest: Self.usbForNobody)
        let watch = try setup.startWatch(asNobody: true, name: "nobody-watch")
        #expect(await eventually { watch.stdout.contains("\"snapshot\"") })
        let driver = try await AccmonConnection.connect(socketPath: setup.socketPath, clientName: "driver")
        defer { driver.close() }
        var random = SplitMix64(seed: 99)
        var live: [Int: ConnectionID] = [:]
        for step in 0..<400 {
            let index = Int.random(in: 0..<10, using: &random)
            if let id = live.removeValue(forKey: index) {
                try await driver.simulateDisconnect(id)
            } else {
                live[index] = try await driver.simulateConnect(
                    Accessory(
                        kind: index < 5 ? .usb : .serial, serialNumber: "N\(index)", vendorID: "1209",
                        productID: String(format: "%04x", index)))
            }
            if step % 50 == 25 {
                try setup.rewrite(step % 100 == 25 ? Self.serialForNobody : Self.usbForNobody)
                try await driver.reloadManifest()
            }
        }
        let expected = try await setup.accmon(["list", "--json"], asNobody: true)
        let truth = Dictionary(
            uniqueKeysWithValues: ((jsonObject(expected.stdout)?["accessories"] as? [[String: Any]]) ?? []).map {
                (($0["connectionID"] as? NSNumber)?.uint64Value ?? 0, $0["accessoryID"] as? String ?? "")
            })
        let converged = await eventually { WatchTranscript(watch.stdout).view == truth }
        let transcript = WatchTranscript(watch.stdout)
        #expect(converged, "nobody's view \(transcript.view) differs from what it may see \(truth)")
        #expect(transcript.problems.isEmpty, "\(transcript.problems.prefix(5))")
        #expect(transcript.events.count > 50, "the storm reached the watcher")
        let sequences = transcript.events.map(\.seq)
        #expect(sequences == sequences.sorted() && Set(sequences).count == sequences.count)
    }
}
