import AccmonLogging
import AccmonProtocol
import AccmonSys
import AccmonTestSupport
import Foundation
import Testing

@testable import AccmondKit

/// The writer thread (``HistoryWriter``): whatever the batches, the compactions (copies of the lines in the file) and
/// the accessory objects handed over with the records, the file it leaves is the one ``HistoryFile`` writes for the
/// newest entries, byte for byte.
@Suite struct HistoryWriterTests {
    /// Random records handed over in random bursts, some with their accessory object's bytes, enough for several
    /// compactions of a small ring. After each burst, and at the end, the file holds the lines `HistoryFile` writes
    /// for the newest entries (at least `capacity`; at the end at most twice as many, and after a burst at most one
    /// burst more: the compaction follows the append that passes twice) and the reservations; at the end it starts
    /// with the header and ends with the last number reserved.
    @Test func theFileIsTheNewestEntriesWhateverTheCompactions() throws {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        let directory = try TemporaryDirectory()
        let descriptor = try DirectoryDescriptor.open(directory.path)
        defer { descriptor.close() }
        let capacity = 5
        let writer = try HistoryWriter(
            directory: descriptor, capacity: capacity, records: [], lastSeq: 0, logger: Logger(label: "test"))
        var records: [HistoryRecord] = []
        for _ in 0..<12 {
            // At most `capacity` records a burst: more within one write interval is the disk-stall case, where the
            // oldest are dropped by design (HistoryDiskFaultTests).
            for _ in 0..<(1 + random.next(below: UInt64(capacity))) {
                let record = HistoryFileTests.randomRecord(&random, seq: UInt64(records.count + 1))
                records.append(record)
                let object: ArraySlice<UInt8>? =
                    random.next(below: 2) == 0
                    ? nil
                    : ProtocolCodec().encodeEvent(
                        AccessoryEvent(.connect, sequence: 1, accessory: record.entry.accessory)
                    ).accessory
                writer.take(record, accessoryObject: object)
            }
            let lines = try Self.entryLines(in: descriptor, endingWith: UInt64(records.count))
            // Seen between two writes, the file may hold one burst past twice the ring: the writer appends a batch,
            // then compacts when the file holds more than twice the ring.
            #expect(lines.count >= min(capacity, records.count) && lines.count <= 3 * capacity, "\(lines.count) lines")
            #expect(lines == Self.entryLines(Array(records.suffix(lines.count))), "ACCMON_TEST_SEED=\(seed)")
        }
        #expect(writer.finish(lastSeq: UInt64(records.count)))
        let bytes = try #require(try descriptor.openForReading(HistoryFile.name).readToEnd(limit: 1 << 20))
        let last = try Self.entryLines(in: descriptor, endingWith: UInt64(records.count))
        #expect(last.count >= capacity && last.count <= 2 * capacity)
        #expect(last == Self.entryLines(Array(records.suffix(last.count))), "ACCMON_TEST_SEED=\(seed)")
        #expect(bytes.starts(with: Array("{\"version\":1}\n".utf8)))
        #expect(bytes.reversed().starts(with: Array("{\"reserved\":\(records.count)}\n".utf8).reversed()))
    }

    /// The lines of `records` as the history file holds them.
    static func entryLines(_ records: [HistoryRecord]) -> [ArraySlice<UInt8>] {
        records.map { record in
            var out = JSONOutput(capacity: 1024)
            HistoryFile.line(record, into: &out)
            let line = out.bytes()
            return line[..<(line.count - 1)]
        }
    }

    /// The file's entry lines (every line but the header and the reservations), once its last entry is numbered
    /// `last`: the writer writes within its interval.
    static func entryLines(in directory: DirectoryDescriptor, endingWith last: UInt64) throws -> [ArraySlice<UInt8>] {
        let deadline = Date().addingTimeInterval(10)
        while true {
            let bytes = try #require(try directory.openForReading(HistoryFile.name).readToEnd(limit: 1 << 20))
            let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).dropLast()
                .filter { !$0.starts(with: Array(#"{"reserved":"#.utf8)) && !$0.starts(with: Array(#"{"version":"#.utf8)) }
            let records = try? HistoryFile.parse(bytes, capacity: 1000).get().records  // try?: not yet whole
            if records?.last?.entry.seq == last || Date() > deadline { return Array(lines) }
            Thread.sleep(forTimeInterval: 0.02)
        }
    }
}
