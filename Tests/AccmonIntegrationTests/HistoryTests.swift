import AccmonClient
import AccmonProtocol
import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// accmond's history with a real daemon: what it records, who sees what (real other users through setpriv), the
/// CLI's selection, and what survives a restart (issue 29).
@Suite(.timeLimit(.minutes(2)))
struct HistoryTests {
    static func decoded(_ output: String) throws -> [HistoryEntry] {
        try output.split(separator: "\n").map { try JSONDecoder().decode(HistoryEntry.self, from: Data($0.utf8)) }
    }

    /// Connects and disconnects are entries with the wall time they happened at and their event's `seq`, numbered
    /// one after another, oldest first.
    @Test func connectsAndDisconnectsAreRecordedWithWallTimeAndEventSeq() async throws {
        let daemon = try await Accmond.start()
        let bag = ConnectionBag()
        let watcher = bag.add(try await daemon.connect("watcher"))
        let events = EventLog(try await watcher.subscribe())
        let admin = bag.add(try await daemon.connect("admin"))
        let before = wallClockSeconds()
        let first = try await admin.simulateConnect(Accessory(kind: .usb, name: "Board", vendorID: "1d6b"))
        _ = try await admin.simulateConnect(Accessory(kind: .serial, name: "UART", vendorID: "0403"))
        try await admin.simulateDisconnect(first)
        let after = wallClockSeconds()
        #expect(await events.waitForCount(3))

        let history = try await admin.history()
        #expect(history.map(\.kind) == [.connect, .connect, .disconnect])
        #expect(history.map(\.eventSeq) == events.events.map(\.sequence))
        #expect(history.map(\.accessory) == events.events.map(\.accessory))
        #expect(history.map(\.seq) == [1, 2, 3])
        for entry in history {
            #expect(entry.time >= before && entry.time <= after, "\(entry.time) not in [\(before), \(after)]")
            #expect(entry.actor == nil && entry.holder == nil && entry.reason == nil)
        }
        #expect(zip(history, history.dropFirst()).allSatisfy { $0.time <= $1.time })
    }

    static let manifest = #"""
        {"version": 1, "admins": {"users": [65533]}, "accessories": [
          {"name": "usb", "match": {"kind": "usb", "id": "*:*"}, "access": {"users": [65534]}},
          {"name": "serial", "match": {"kind": "serial", "id": "*:*"}, "access": {"users": [65533]}}
        ]}
        """#

    /// Each user sees the entries of the accessories it could see when they were recorded: `nobody` the USB board's
    /// (its entry lets uid 65534 see it), uid 65533 (an admin of the manifest) the serial port's and the rejected
    /// connect with its reason (a Bluetooth keyboard no entry matches), root everything. A reload that gives the
    /// board to uid 65533 instead changes nothing of what was recorded before it.
    @Test func eachUserSeesWhatItCouldSeeAndRejectedConnectsOnlyAdmins() async throws {
        let setup = try await ManifestEnforcementTests.Setup(manifest: Self.manifest)
        let bag = ConnectionBag()
        let root = bag.add(try await AccmonConnection.connect(socketPath: setup.socketPath, clientName: "root"))
        let usb = try await root.simulateConnect(Accessory(kind: .usb, name: "Board", vendorID: "1d6b"))
        let serial = try await root.simulateConnect(Accessory(kind: .serial, name: "UART", vendorID: "0403"))
        let keyboard = try await root.simulateConnect(Accessory(kind: .bluetoothHID, name: "Keys", vendorID: "05ac"))
        for connection in [usb, serial, keyboard] { try await root.simulateDisconnect(connection) }

        func seen(as user: [String]) async throws -> [String] {
            let accmon = try Binaries.accmon.path
            let result = try await run(
                URL(fileURLWithPath: user.isEmpty ? accmon : "/usr/bin/setpriv"),
                (user.isEmpty ? [] : user + [accmon]) + ["--socket", setup.socketPath, "history", "--json"],
                in: setup.directory)
            try #require(result.termination == .exited(0), "\(result)")
            return try Self.decoded(result.stdout).map { "\($0.kind.rawValue) \($0.accessory.kind.rawValue)" }
        }
        let nobody = ["--reuid=65534", "--regid=65534", "--clear-groups"]
        let admin = ["--reuid=65533", "--regid=65533", "--clear-groups"]
        #expect(try await seen(as: nobody) == ["connect usb", "disconnect usb"])
        #expect(
            try await seen(as: admin) == [
                "connect serial", "rejected bluetooth-hid", "disconnect serial", "disconnect bluetooth-hid",
            ])
        #expect(
            try await seen(as: []) == [
                "connect usb", "connect serial", "rejected bluetooth-hid", "disconnect usb", "disconnect serial",
                "disconnect bluetooth-hid",
            ])
        let rejected = try await root.history().first { $0.kind == .rejected }
        #expect(rejected?.reason?.contains("no manifest entry matches") == true, "\(String(describing: rejected))")

        try setup.rewrite(Self.manifest.replacingOccurrences(of: "[65534]", with: "[65533]"))
        try await root.reloadManifest()
        #expect(try await seen(as: nobody) == ["connect usb", "disconnect usb"])
        #expect(try await seen(as: admin).filter { $0.hasSuffix("usb") }.isEmpty)
    }

    /// `accmon history` selects with `--limit`, `--since` (a duration, an ISO 8601 time) and the filter options, and
    /// prints one line per entry, or the wire form with `--json`.
    @Test func theCLISelectsBySinceLimitAndFilter() async throws {
        let daemon = try await Accmond.start()
        let admin = try await daemon.connect("admin")
        defer { admin.close() }
        _ = try await admin.simulateConnect(Accessory(kind: .usb, name: "First Board", vendorID: "1d6b"))
        _ = try await admin.simulateConnect(Accessory(kind: .serial, name: "UART", vendorID: "0403"))
        try await Task.sleep(for: .milliseconds(50))
        let between = wallClockSeconds()
        try await Task.sleep(for: .milliseconds(50))
        _ = try await admin.simulateConnect(Accessory(kind: .usb, name: "Last", vendorID: "1d6b"))

        func names(_ arguments: [String]) async throws -> [String] {
            let result = try await daemon.accmon(["history", "--json"] + arguments)
            try #require(result.termination == .exited(0), "\(result)")
            return try Self.decoded(result.stdout).map(\.accessory.name)
        }
        #expect(try await names([]) == ["First Board", "UART", "Last"])
        #expect(try await names(["--limit", "2"]) == ["UART", "Last"])
        #expect(try await names(["--kind", "usb"]) == ["First Board", "Last"])
        #expect(try await names(["--vendor", "403"]) == ["UART"])
        #expect(try await names(["--kind", "usb", "--limit", "1"]) == ["Last"])
        #expect(try await names(["--since", "1h"]) == ["First Board", "UART", "Last"])
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let iso = formatter.string(from: Date(timeIntervalSince1970: between))
        #expect(try await names(["--since", iso]) == ["Last"], "\(iso)")
        #expect(try await names(["--since", "2099-01-01"]).isEmpty)

        let human = try await daemon.accmon(["history", "--limit", "1"])
        #expect(human.termination == .exited(0))
        let line = human.stdout.split(separator: "\n").first.map(String.init) ?? ""
        #expect(line.contains("  connect     usb") && line.contains("1d6b:") && line.contains("Last"), "\(line)")
        let status = try await daemon.accmon(["status"])
        #expect(status.stdout.contains("recent history (accmon history for more):\n"), "\(status)")
        #expect(status.stdout.split(separator: "\n").suffix(3).allSatisfy { $0.contains("  connect  ") }, "\(status)")
    }

    /// Usage errors exit 64 and say where and why, before anything connects.
    @Test(arguments: [
        (["--since", "5x"], "Error: --since: '5x' is neither a duration"),
        (["--since", "2026-02-30"], "Error: --since: '2026-02-30': day 30 is not from 1 to 28"),
        (["--since", "2026-12-02T10:00:00+25:00"], "zone hour 25 is not from 0 to 23"),
        (["--since"], "Error: --since needs a value"),
        (["--limit", "0"], "Error: --limit: '0' is not a whole number from 1 to 10000"),
        (["--limit", "10001"], "Error: --limit: '10001' is not a whole number from 1 to 10000"),
        (["--kind", "printer"], "Error: --kind: 'printer' is not a kind"),
        (["--colour"], "Error: unknown option '--colour'"),
    ])
    func usageErrorsExit64(arguments: [String], message: String) async throws {
        let directory = try TemporaryDirectory()
        let result = try await run(
            try Binaries.accmon, ["--socket", directory.file("none"), "history"] + arguments, in: directory)
        #expect(result.termination == .exited(64), "\(result)")
        #expect(result.stderr.contains(message), "\(result)")
        #expect(result.stderr.contains("See 'accmon history --help'."), "\(result)")
    }

    /// One reply holds at most about the client buffer's bound (`--max-client-buffer`, here 4096 bytes), the newest
    /// entries first, and says `truncated`: a client that asks for 10,000 entries and never reads costs the daemon
    /// that, not megabytes. `before` pages back from the oldest entry given, with no gap and no duplicate; the CLI
    /// (through AccmonClient) does so until it has what `--limit` asks.
    @Test func aLongHistoryIsAnsweredInPagesOfAboutTheClientBuffer() async throws {
        let daemon = try await Accmond.start(arguments: ["--max-client-buffer", "4096"])
        let admin = try await daemon.connect("admin")
        defer { admin.close() }
        for index in 1...120 {
            _ = try await admin.simulateConnect(Accessory(kind: .usb, name: "Board \(index)", vendorID: "1d6b"))
        }
        let raw = try RawSocket(path: daemon.socketPath)
        try raw.send(#"{"type":"history","id":1,"limit":10000}"# + "\n")
        let line = try #require(await raw.readLine())
        let first = try #require(jsonObject(line))
        let entries = try #require(first["entries"] as? [[String: Any]])
        #expect(first["truncated"] as? Bool == true)
        #expect(line.utf8.count <= 4096 + 64 && line.utf8.count > 4096 - 700, "\(line.utf8.count) bytes")
        let seqs = entries.compactMap { $0["seq"] as? Int }
        #expect(seqs.last == 120 && seqs == Array(seqs.first!...120), "\(seqs)")
        try raw.send(#"{"type":"history","id":2,"limit":10000,"before":\#(seqs[0])}"# + "\n")
        let secondLine = try #require(await raw.readLine())
        let second = try #require(jsonObject(secondLine))
        let older = try #require(second["entries"] as? [[String: Any]]).compactMap { $0["seq"] as? Int }
        #expect(older.last == seqs[0] - 1 && older.count == seqs.count, "\(older)")
        try raw.send(#"{"type":"history","id":3,"before":1.5}"# + "\n")
        let errorLine = try #require(await raw.readLine())
        let error = try #require(jsonObject(errorLine))
        #expect(error["code"] as? String == "invalid-field", "\(error)")

        let result = try await daemon.accmon(["history", "--json", "--limit", "115"])
        try #require(result.termination == .exited(0), "\(result)")
        #expect(try Self.decoded(result.stdout).map(\.seq) == Array(6...120))
        #expect(try await admin.history(limit: HistoryQuery.maximumLimit).map(\.accessory.name).first == "Board 1")
    }

    /// `--history-entries 0` keeps none: the reply is empty and no file is written; a value out of range is a usage
    /// error.
    @Test func zeroEntriesTurnTheHistoryOff() async throws {
        let root = try TemporaryDirectory()
        let state = root.file("state")
        let daemon = try await Accmond.start(arguments: ["--state-dir", state, "--history-entries", "0"])
        let admin = try await daemon.connect("admin")
        defer { admin.close() }
        _ = try await admin.simulateConnect(Accessory(kind: .usb, name: "Unrecorded"))
        #expect(try await admin.history().isEmpty)
        #expect(!entries(of: state).contains("history.jsonl"), "\(entries(of: state))")
        for value in ["-1", "1000001", "many"] {
            let result = try await run(try Binaries.accmond, ["--history-entries", value], in: root)
            #expect(result.termination == .exited(64), "\(result)")
            #expect(result.stderr.contains("Error: --history-entries: '\(value)'"), "\(result)")
        }
    }

    // MARK: Restarts

    /// Plugs and unplugs some accessories (none stays: one left connected would be disconnected at the restart, as
    /// the simulated source forgets it); returns the history the daemon reports.
    static func recordSome(on daemon: Accmond) async throws -> [HistoryEntry] {
        let admin = try await daemon.connect("admin")
        defer { admin.close() }
        let board = try await admin.simulateConnect(Accessory(kind: .usb, name: "Board", serialNumber: "B1"))
        let uart = try await admin.simulateConnect(Accessory(kind: .serial, name: "UART \"quoted\" é"))
        try await admin.simulateDisconnect(board)
        try await admin.simulateDisconnect(uart)
        return try await admin.history()
    }

    /// After a SIGTERM the history is all there, and numbering goes on from the last entry.
    @Test func theHistoryIsKeptAcrossARestart() async throws {
        let root = try TemporaryDirectory()
        let state = root.file("state")
        let first = try await Accmond.start(arguments: ["--state-dir", state])
        let before = try await Self.recordSome(on: first)
        first.process.send(SIGTERM)
        #expect(await first.process.waitForExit() == .exited(0), "\(first.log)")

        let second = try await Accmond.start(arguments: ["--state-dir", state])
        let admin = try await second.connect("admin")
        defer { admin.close() }
        #expect(try await admin.history() == before)
        _ = try await admin.simulateConnect(Accessory(kind: .usb, name: "After"))
        let after = try await admin.history()
        #expect(after.dropLast() == before[...])
        #expect(after.last?.seq == before.last!.seq + 1 && after.last?.accessory.name == "After")
    }

    /// After `kill -9` the entries recorded more than 100 ms before are there, and the numbers given after the
    /// restart are higher than any given before (they continue after the reservation).
    @Test func theHistoryIsKeptAcrossAKill() async throws {
        let root = try TemporaryDirectory()
        let state = root.file("state")
        let first = try await Accmond.start(arguments: ["--state-dir", state])
        let before = try await Self.recordSome(on: first)
        try await Task.sleep(for: .milliseconds(300))
        first.process.send(SIGKILL)
        _ = await first.process.waitForExit()

        let second = try await Accmond.start(arguments: ["--state-dir", state])
        let admin = try await second.connect("admin")
        defer { admin.close() }
        #expect(try await admin.history() == before, "\(second.log)")
        _ = try await admin.simulateConnect(Accessory(kind: .usb, name: "After"))
        let newest = try #require(try await admin.history().last)
        #expect(newest.accessory.name == "After" && newest.seq > before.last!.seq, "\(newest.seq)")
    }

    /// A history file that is not one (garbage, larger than the limit, a link planted in its place) is moved aside
    /// with a log line saying why and where, never followed; accmond starts with an empty history and records again.
    @Test(arguments: ["garbage", "oversized", "link"])
    func aCorruptOrOversizedFileIsSetAside(kind: String) async throws {
        let root = try TemporaryDirectory()
        let state = root.file("state")
        try makeDirectory(state, mode: 0o700)
        let file = "\(state)/history.jsonl"
        let victim = root.file("victim")
        try "precious\n".write(toFile: victim, atomically: false, encoding: .utf8)
        if kind == "garbage" {
            try "{\"version\":1}\nnot json at all\n".write(toFile: file, atomically: false, encoding: .utf8)
        } else if kind == "link" {
            try FileManager.default.createSymbolicLink(atPath: file, withDestinationPath: victim)
        } else {
            let descriptor = open(file, O_WRONLY | O_CREAT, 0o600)
            try #require(descriptor >= 0 && ftruncate(descriptor, 17 << 20) == 0)
            close(descriptor)
        }
        let daemon = try await Accmond.start(arguments: ["--state-dir", state, "--history-entries", "10"])
        let admin = try await daemon.connect("admin")
        defer { admin.close() }
        #expect(try await admin.history().isEmpty)
        _ = try await admin.simulateConnect(Accessory(kind: .usb, name: "Fresh"))
        #expect(try await admin.history().map(\.accessory.name) == ["Fresh"])
        let reason =
            [
                "garbage": "line 2: not valid JSON", "oversized": "larger than 16 MiB",
                "link": "not a regular file (a symbolic link)",
            ][kind]!
        #expect(
            daemon.log.contains("history: '\(file)': unreadable (\(reason)); moved to 'history.jsonl.corrupt-"),
            "\(daemon.log)")
        #expect(entries(of: state).contains { $0.hasPrefix("history.jsonl.corrupt-") }, "\(entries(of: state))")
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "precious\n")
    }
}
