import AccmonClient
import AccmonProtocol
import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// What a client printed with `accmon watch --json` (optionally `--restore-id`): its view after each line, checked
/// for consistency as it is built.
struct WatchTranscript {
    var view: [UInt64: String] = [:]
    var problems: [String] = []
    var events: [(type: String, seq: UInt64, connection: UInt64, accessory: String)] = []
    var sessionLines: [[String: Any]] = []

    init(_ output: String) {
        for line in output.split(separator: "\n") {
            guard let object = jsonObject(String(line)), let type = object["type"] as? String else {
                problems.append("unreadable line: \(line)")
                continue
            }
            switch type {
            case "snapshot", "session":
                // A session line restarts the view: it is what the restarted client is handed.
                if type == "session" { sessionLines.append(object) }
                view = [:]
                for accessory in object["accessories"] as? [[String: Any]] ?? [] {
                    view[(accessory["connectionID"] as? NSNumber)?.uint64Value ?? 0] =
                        accessory["accessoryID"] as? String
                }
            case "connect", "disconnect":
                let accessory = object["accessory"] as? [String: Any] ?? [:]
                let connection = (accessory["connectionID"] as? NSNumber)?.uint64Value ?? 0
                let seq = (object["seq"] as? NSNumber)?.uint64Value ?? 0
                let id = accessory["accessoryID"] as? String ?? "?"
                events.append((type, seq, connection, id))
                if type == "connect" {
                    if view[connection] != nil {
                        problems.append("connect of \(connection) already in view (seq \(seq))")
                    }
                    view[connection] = id
                } else {
                    if view.removeValue(forKey: connection) == nil {
                        problems.append("disconnect of \(connection) never seen connected (seq \(seq))")
                    }
                }
            default:
                problems.append("unexpected line type \(type)")
            }
        }
    }
}

/// Drives the simulated source over one connection.
struct Plugger {
    let connection: AccmonConnection
    var live: [Int: ConnectionID] = [:]

    /// Plugs accessory `index` in, or out if it is in.
    mutating func toggle(_ index: Int) async throws {
        if let id = live.removeValue(forKey: index) {
            try await connection.simulateDisconnect(id)
        } else {
            live[index] = try await connection.simulateConnect(
                Accessory(
                    kind: .usb, name: "storm device \(index) " + String(repeating: "x", count: 120),
                    serialNumber: "S\(index)", vendorID: "1209", productID: String(format: "%04x", index)))
        }
    }
}

@Suite(.serialized) struct SuspensionAndRestoreTests {
    /// The daemon's truth as connection id → accessory id.
    func truth(_ daemon: Accmond) async throws -> [UInt64: String] {
        let connection = try await daemon.connect("truth")
        defer { connection.close() }
        let snapshot = try await connection.list()
        return Dictionary(uniqueKeysWithValues: snapshot.accessories.map { ($0.connectionID.rawValue, $0.accessoryID) })
    }

    @Test func stoppedClientGetsExactlyTheNetChangesAfterSIGCONT() async throws {
        let daemon = try await Accmond.start(arguments: ["--max-client-buffer", "65536"])
        let watcher = try daemon.startAccmon(["watch", "--json"], name: "stopped-watch")
        #expect(await eventually { watcher.stdout.contains("\"snapshot\"") })
        let driver = try await daemon.connect("driver")
        defer { driver.close() }
        var plugger = Plugger(connection: driver)
        try await plugger.toggle(0)  // seen before the stop: its disconnect must arrive
        #expect(await eventually { watcher.stdout.contains("\"connect\"") })

        watcher.send(SIGSTOP)
        var random = SplitMix64(seed: 42)
        for _ in 0..<3_000 { try await plugger.toggle(Int.random(in: 0..<20, using: &random)) }
        let during = try await driver.status()
        let stopped = during.clients.first { $0.pid == watcher.pid }
        #expect(
            stopped?.state == .suspended && stopped?.suspendedBecause == "not-reading", "\(String(describing: stopped))"
        )
        #expect((stopped?.queuedEvents ?? .max) <= 2 * 20, "queue over its bound: \(String(describing: stopped))")

        watcher.send(SIGCONT)
        let expected = try await truth(daemon)
        let converged = await eventually(timeout: .seconds(15)) { WatchTranscript(watcher.stdout).view == expected }
        let transcript = WatchTranscript(watcher.stdout)
        #expect(converged, "view \(transcript.view.count) accessories, truth \(expected.count)")
        #expect(transcript.problems.isEmpty, "\(transcript.problems.prefix(5))")
        #expect(transcript.events.count < 3_001, "no coalescing happened: \(transcript.events.count) events")
        let sequences = transcript.events.map(\.seq)
        #expect(sequences == sequences.sorted() && Set(sequences).count == sequences.count, "order or repeats")
        let after = try await driver.status()
        #expect(after.clients.first { $0.pid == watcher.pid }?.state == .live)
        watcher.send(SIGINT)
    }

    @Test func killedRestoreClientGetsItsStateAndTheMissedEventsOnce() async throws {
        let daemon = try await Accmond.start()
        let driver = try await daemon.connect("driver")
        defer { driver.close() }
        var plugger = Plugger(connection: driver)
        let first = try daemon.startAccmon(["watch", "--json", "--restore-id", "probe"], name: "restore-1")
        #expect(await eventually { first.stdout.contains("\"session\"") })
        try await plugger.toggle(1)
        try await plugger.toggle(2)
        #expect(await eventually { WatchTranscript(first.stdout).events.count == 2 })
        // The second event was consumed once the client asked for a third: the daemon has its acknowledgement.
        try await Task.sleep(for: .milliseconds(100))
        first.send(SIGKILL)
        _ = await first.waitForExit()
        #expect(try await eventually { try await driver.status().clients.contains { $0.state == .preserved } })

        try await plugger.toggle(1)  // disconnect of a known accessory: delivered
        try await plugger.toggle(3)  // a new one: delivered
        try await plugger.toggle(4)
        try await plugger.toggle(4)  // came and went while away: never heard of
        let second = try daemon.startAccmon(["watch", "--json", "--restore-id", "probe"], name: "restore-2")
        let expected = try await truth(daemon)
        #expect(await eventually { WatchTranscript(second.stdout).view == expected })
        let transcript = WatchTranscript(second.stdout)
        #expect(transcript.problems.isEmpty, "\(transcript.problems)")
        #expect(transcript.sessionLines.first?["restored"] as? Bool == true)
        let known = Set(
            (transcript.sessionLines.first?["accessories"] as? [[String: Any]] ?? []).compactMap {
                $0["serialNumber"] as? String
            })
        #expect(known == ["S1", "S2"], "the restored state is what the client knew: \(known)")
        #expect(transcript.events.map(\.type) == ["disconnect", "connect"], "\(transcript.events)")
        #expect(!second.stdout.contains("\"S4\""), "a pair that began and ended while away reached the client")
        second.send(SIGINT)
    }

    @Test func anotherUserCannotClaimARestoreID() async throws {
        let daemon = try await Accmond.start()
        let first = try daemon.startAccmon(["watch", "--json", "--restore-id", "mine"], name: "owner")
        #expect(await eventually { first.stdout.contains("\"session\"") })
        first.send(SIGKILL)
        _ = await first.waitForExit()
        // Let nobody reach the socket, then say hello as nobody with root's restore id: a fresh session, not root's.
        chmod(daemon.directory.path, 0o755)
        chmod(daemon.socketPath, 0o666)
        let socat = try await run(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            [
                "--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh", "-c",
                "printf '{\"type\":\"hello\",\"versions\":[1],\"restoreID\":\"mine\"}\\n' | "
                    + "socat -t 1 - UNIX-CONNECT:\(daemon.socketPath)",
            ], in: daemon.directory)
        #expect(socat.stdout.contains("\"restored\":false"), "\(socat)")
        let status = try await daemon.connect().status()
        #expect(status.clients.contains { $0.state == .preserved && $0.uid == 0 })
    }

    /// The daemon killed with SIGKILL at random points of a storm and restarted, 50 times (`make soak`: 500, or
    /// `ACCMON_SOAK_TRIALS`): a client with a restore id ends each trial with the true connected set, and never sees
    /// a repeated or impossible transition.
    @Test func daemonKilledDuringStormsLosesNothing() async throws {
        let directory = try TemporaryDirectory()
        let socketPath = directory.file("s")
        let flags =
            ["--socket", socketPath, "--simulate", "--no-udev", "--state-dir", directory.file("state")]
            + (try allowEverythingManifest(in: directory))
        func startDaemon(_ trial: Int) async throws -> ChildProcess {
            let process = try ChildProcess(try Binaries.accmond, flags, name: "accmond-\(trial)", directory: directory)
            let up = await eventually {
                guard let probe = try? UnixSocket.connect(path: socketPath) else { return false }  // try?: not yet
                probe.close()
                return true
            }
            #expect(up, "accmond did not start: \(process.stderr)")
            return process
        }
        var daemon = try await startDaemon(0)
        let watcher = try ChildProcess(
            try Binaries.accmon, ["--socket", socketPath, "watch", "--json", "--restore-id", "survivor"],
            name: "survivor", directory: directory)
        #expect(await eventually { watcher.stdout.contains("\"session\"") })
        var random = SplitMix64(seed: 2026)
        let trials = Int(ProcessInfo.processInfo.environment["ACCMON_SOAK_TRIALS"] ?? "") ?? 50
        for trial in 1...trials {
            let driver = try await AccmonConnection.connect(socketPath: socketPath, clientName: "driver")
            var plugger = Plugger(connection: driver)
            let steps = Int.random(in: 5...60, using: &random)
            let killAt = Int.random(in: 0..<steps, using: &random)
            for step in 0..<steps {
                if step == killAt {
                    daemon.send(SIGKILL)
                    _ = await daemon.waitForExit()
                    break
                }
                try await plugger.toggle(Int.random(in: 0..<8, using: &random))
            }
            driver.close()
            daemon = try await startDaemon(trial)
            // After the restart: a few more plugs, then the client must converge on the truth.
            let after = try await AccmonConnection.connect(socketPath: socketPath, clientName: "driver")
            var replugger = Plugger(connection: after)
            for index in 0..<Int.random(in: 0...3, using: &random) { try await replugger.toggle(index) }
            let expected = Dictionary(
                uniqueKeysWithValues: try await after.list().accessories.map {
                    ($0.connectionID.rawValue, $0.accessoryID)
                })
            after.close()
            let converged = await eventually(timeout: .seconds(10)) { WatchTranscript(watcher.stdout).view == expected }
            let transcript = WatchTranscript(watcher.stdout)
            #expect(converged, "trial \(trial) (kill at \(killAt)/\(steps)): view \(transcript.view) truth \(expected)")
            #expect(transcript.problems.isEmpty, "trial \(trial): \(transcript.problems.prefix(3))")
            if !converged || !transcript.problems.isEmpty { break }
        }
        let sequences = WatchTranscript(watcher.stdout).events.map(\.seq)
        #expect(zip(sequences, sequences.dropFirst()).allSatisfy { $0 <= $1 }, "sequence numbers went backwards")
        watcher.send(SIGINT)
        daemon.send(SIGTERM)
        _ = await daemon.waitForExit()
    }
}
