import AccmonClient
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// The history's writer against a disk that stops answering or fails (Tests/tools/faultfs.py under the state
/// directory): events go on as before, memory stays bounded, and the file catches up when the disk does.
@Suite(.timeLimit(.minutes(2)))
struct HistoryDiskFaultTests {
    /// The entries of the history file (the faulty file system's backing directory holds it).
    static func entriesOnDisk(_ daemon: FaultyDiskDaemon) -> [HistoryEntry] {
        // try?: no file yet is no entry.
        guard let text = try? String(contentsOfFile: "\(daemon.backing)/history.jsonl", encoding: .utf8) else {
            return []
        }
        struct Line: Decodable { var entry: HistoryEntry? }
        return text.split(separator: "\n").compactMap {
            try? JSONDecoder().decode(Line.self, from: Data($0.utf8)).entry  // try?: a line cut short is no entry
        }
    }

    /// While writes to the state directory hang, 600 entries (six times the ring of 100) are recorded: every event
    /// reaches a subscriber, `history` answers the newest 100, and the writer keeps at most a ring of them waiting
    /// (the older ones dropped, and counted in the log). When the disk answers again, the file gets the newest 100.
    @Test func aStalledDiskStallsNoEventAndKeepsMemoryBounded() async throws {
        let daemon = try await FaultyDiskDaemon(arguments: ["--history-entries", "100"])
        let bag = ConnectionBag()
        let watcher = bag.add(try await AccmonConnection.connect(socketPath: daemon.socketPath, clientName: "w"))
        let events = EventLog(try await watcher.subscribe())
        let admin = bag.add(try await AccmonConnection.connect(socketPath: daemon.socketPath, clientName: "admin"))
        try daemon.stall()
        for index in 0..<300 {
            let connection = try await admin.simulateConnect(Accessory(kind: .usb, name: "Board \(index)"))
            try await admin.simulateDisconnect(connection)
        }
        #expect(await events.waitForCount(600), "events stalled: \(events.count) of 600; \(daemon.log)")
        let kept = try await admin.history(limit: HistoryQuery.maximumLimit)
        #expect(kept.count == 100 && kept.last?.accessory.name == "Board 299" && kept.last?.kind == .disconnect)
        #expect(Self.entriesOnDisk(daemon).count < 100, "written while the disk hung")

        daemon.resume()
        let caughtUp = await eventually(timeout: .seconds(10)) {
            Array(Self.entriesOnDisk(daemon).suffix(100)) == kept
        }
        #expect(caughtUp, "on disk: \(Self.entriesOnDisk(daemon).count) entries; \(daemon.log)")
        #expect(
            await eventually { daemon.log.contains("older entries were dropped meanwhile (past the 100 kept)") },
            "\(daemon.log)")
        #expect(Self.entriesOnDisk(daemon).count <= 200)
    }

    /// While writes fail (EIO), events go on and the failure is logged once; when the disk works again, the whole
    /// history is rewritten.
    @Test func aFailingDiskIsRetriedAndCaughtUp() async throws {
        let daemon = try await FaultyDiskDaemon(arguments: [])
        let bag = ConnectionBag()
        let watcher = bag.add(try await AccmonConnection.connect(socketPath: daemon.socketPath, clientName: "w"))
        let events = EventLog(try await watcher.subscribe())
        let admin = bag.add(try await AccmonConnection.connect(socketPath: daemon.socketPath, clientName: "admin"))
        _ = try await admin.simulateConnect(Accessory(kind: .usb, name: "Before"))
        #expect(await eventually { Self.entriesOnDisk(daemon).count == 1 }, "\(daemon.log)")
        try daemon.fail()
        for index in 0..<50 { _ = try await admin.simulateConnect(Accessory(kind: .serial, name: "During \(index)")) }
        #expect(await events.waitForCount(51), "\(daemon.log)")
        #expect(
            await eventually {
                daemon.log.contains("history: cannot write: ") && daemon.log.contains("Input/output error")
            },
            "\(daemon.log)")
        let failureLines = daemon.log.components(separatedBy: "history: cannot write: ").count - 1
        #expect(failureLines == 1, "\(daemon.log)")

        daemon.resume()
        let all = try await admin.history()
        #expect(all.count == 51)
        #expect(await eventually(timeout: .seconds(10)) { Self.entriesOnDisk(daemon) == all }, "\(daemon.log)")
        #expect(await eventually { daemon.log.contains("history: written again") }, "\(daemon.log)")
    }
}
