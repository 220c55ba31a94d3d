import AccmonManifest
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

@testable import AccmondKit

/// The history file's format (``HistoryFile``): what is written reads back whole, a line cut short by a crash is
/// dropped, anything else wrong is refused with its line, and numbers continue after the highest seen.
@Suite struct HistoryFileTests {
    static func randomRecord(_ random: inout SplitMix64, seq: UInt64) -> HistoryRecord {
        var entry = Fixtures.randomHistoryEntry(using: &random)
        entry.seq = seq
        let audience: (uids: [UInt32], gids: [UInt32])? =
            random.next(below: 3) == 0
            ? nil : ((0..<random.next(below: 3)).map { _ in UInt32(random.next(below: 70_000)) }, [20, 65534])
        return HistoryRecord(entry: entry, audience: audience)
    }

    static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    /// Random records (awkward strings, every kind, admins-only or not) written as a file read back equal, with the
    /// same audiences, and the last number the reservation's when it is higher.
    @Test func whatIsWrittenReadsBackWhole() throws {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        for _ in 0..<100 {
            var seq = random.next(below: 1000)
            let records = (0..<random.next(below: 20)).map { _ in
                seq += 1 + random.next(below: 3)
                return Self.randomRecord(&random, seq: seq)
            }
            let reserved = seq + random.next(below: 2) * random.next(below: 200_000)
            let bytes = HistoryFile.contents(records, reserved: reserved)
            let read = try HistoryFile.parse(bytes, capacity: 10_000).get()
            #expect(read.records.map(\.entry) == records.map(\.entry), "ACCMON_TEST_SEED=\(seed)")
            #expect(read.records.map(\.audience?.uids) == records.map(\.audience?.uids))
            #expect(read.records.map(\.audience?.gids) == records.map(\.audience?.gids))
            #expect(read.lastSeq == max(seq, reserved) && !read.droppedCutLine)
            // A smaller ring keeps the newest.
            let few = try HistoryFile.parse(bytes, capacity: 3).get()
            #expect(few.records.map(\.entry) == records.suffix(3).map(\.entry))
        }
    }

    /// A read-back record is visible to the ids written and to root, or to admins only; names are gone.
    @Test func audiencesReadBackAsIDs() throws {
        let entry = HistoryEntry(seq: 1, time: 1, kind: .connect, accessory: Accessory(kind: .usb))
        let original = HistoryRecord(
            entry: entry,
            verdict: .allowed(
                entryName: "e", protocols: [],
                access: AccessList(users: [.name("alice"), .id(7), .name("ghost")], groups: [.name("lab")])),
            accounts: AccountIDs(users: ["alice": 1001], groups: ["lab": 30]))
        let bytes = HistoryFile.contents([original], reserved: 1)
        #expect(Self.text(bytes).contains(#","gids":[30],"uids":[1001,7]}"#), "\(Self.text(bytes))")
        let read = try #require(try HistoryFile.parse(bytes, capacity: 10).get().records.first)
        for (principal, visible) in [
            (ClientPrincipal(uid: 1001, gids: [1001]), true), (ClientPrincipal(uid: 7, gids: [7]), true),
            (ClientPrincipal(uid: 5, gids: [5, 30]), true), (ClientPrincipal(uid: 0, gids: [0]), true),
            (ClientPrincipal(uid: 5, gids: [5]), false),
        ] {
            #expect(read.isVisible(to: principal, isAdmin: false) == visible, "\(principal)")
            #expect(original.isVisible(to: principal, isAdmin: false) == visible, "\(principal)")
        }
        var rejectedEntry = entry
        rejectedEntry.kind = .rejected
        let rejected = HistoryRecord(entry: rejectedEntry, verdict: .rejected(reason: "no"), accounts: AccountIDs())
        let readRejected = try #require(
            try HistoryFile.parse(HistoryFile.contents([rejected], reserved: 1), capacity: 10).get().records.first)
        #expect(!readRejected.isVisible(to: ClientPrincipal(uid: 0, gids: [0]), isAdmin: false))
        #expect(readRejected.isVisible(to: ClientPrincipal(uid: 1001, gids: [1001]), isAdmin: true))
    }

    /// The last line cut short (a crash mid-write) is dropped; the rest stands.
    @Test func aLineCutShortAtTheEndIsDropped() throws {
        var random = SplitMix64(seed: 7)
        let records = (1...3).map { Self.randomRecord(&random, seq: UInt64($0)) }
        let whole = HistoryFile.contents(records, reserved: 3)
        for cut in [1, 10, whole.count / 3] {
            var bytes = HistoryFile.contents(Array(records.prefix(2)), reserved: 2)
            bytes += HistoryFile.contents([records[2]], reserved: 3).drop { $0 != 0x0A }.dropFirst().prefix(cut)
            let read = try HistoryFile.parse(bytes, capacity: 10).get()
            #expect(read.records.map(\.entry) == records.prefix(2).map(\.entry) && read.droppedCutLine)
            #expect(read.lastSeq == 2)
        }
    }

    /// A bad line anywhere but at the end, a wrong first line, numbers out of order or an empty file are refused,
    /// naming the line; the highest number readable still counts.
    @Test func aCorruptFileIsRefusedNamingTheLine() {
        var random = SplitMix64(seed: 8)
        let records = (1...3).map { Self.randomRecord(&random, seq: UInt64($0) * 10) }
        let good = Self.text(HistoryFile.contents(records, reserved: 30))
        var lines = good.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        lines[2] = "{\"entry\":{\"kind\":\"connect\"}}"
        let cases: [(String, String, UInt64)] = [
            (lines.joined(separator: "\n"), "line 3: entry.seq: missing", 30),
            (
                good.replacingOccurrences(of: "{\"version\":1}", with: "{\"version\":2}"), "line 1: not a history file",
                30
            ),
            (
                "garbage\n" + good.split(separator: "\n").dropFirst().joined(separator: "\n") + "\n",
                "line 1: not valid JSON", 30
            ),
            (good + "{\"something\":1}\n", "line 6: neither an entry nor a reservation", 30),
            (good + good.split(separator: "\n")[1] + "\n", "line 6: seq 10 does not follow 30", 30),
            ("", "empty", 0),
        ]
        for (text, reason, lastSeq) in cases {
            switch HistoryFile.parse(Array(text.utf8), capacity: 10) {
            case .success: Issue.record("accepted: \(text)")
            case .failure(let failure):
                #expect(failure.reason.hasPrefix(reason), "\(failure.reason)")
                #expect(failure.lastSeq == lastSeq, "\(reason)")
            }
        }
    }
}
