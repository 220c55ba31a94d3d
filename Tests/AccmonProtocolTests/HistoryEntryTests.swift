import AccmonTestSupport
import Foundation
import Testing

@testable import AccmonProtocol

/// The history's wire shapes: the entry object as the issue fixes it, the hand-written reply byte for byte
/// JSONEncoder's, and the `history` request's errors.
@Suite struct HistoryEntryTests {
    /// The wire form of the task (issue 29): keys sorted, absent fields left out, the time as given.
    @Test func theEntryHasItsFixedWireForm() throws {
        let accessory = Accessory(kind: .usb, accessoryID: "usb:1d6b:0104", vendorID: "1d6b", productID: "0104")
        let full = HistoryEntry(
            seq: 12, time: 1_796_000_000.123, kind: .connect, accessory: accessory, eventSeq: 41,
            actor: Party(user: "alice", uid: 1000, pid: 4242, client: "accmon"),
            holder: Party(user: "ci", remote: true),
            reason: "flashing")
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let accessoryJSON = String(decoding: try encoder.encode(accessory), as: UTF8.self)
        #expect(
            String(decoding: try encoder.encode(full), as: UTF8.self)
                == #"{"accessory":"# + accessoryJSON
                + #","actor":{"client":"accmon","pid":4242,"remote":false,"uid":1000,"user":"alice"},"eventSeq":41,"#
                + #""holder":{"remote":true,"user":"ci"},"kind":"connect","reason":"flashing","seq":12,"#
                + #""time":1796000000.123}"#)
        let bare = HistoryEntry(seq: 1, time: 1_796_000_000, kind: .break, accessory: accessory)
        #expect(
            String(decoding: try encoder.encode(bare), as: UTF8.self)
                == #"{"accessory":"# + accessoryJSON + #","kind":"break","seq":1,"time":1796000000}"#)
        #expect(
            HistoryEntry.Kind.allCases.map(\.rawValue) == [
                "connect", "disconnect", "rejected", "claim", "release", "contention", "break",
            ])
    }

    /// Random entries (every kind, awkward strings, optional fields present or not, any time): the hand-written
    /// reply is JSONEncoder's, byte for byte, and reads back equal.
    @Test func theWrittenReplyIsJSONEncodersForRandomEntries() throws {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        let codec = ProtocolCodec()
        for round in 0..<300 {
            let entries = (0..<Int(random.next(below: 4))).map { _ in Fixtures.randomHistoryEntry(using: &random) }
            let id = Fixtures.requestIDs[round % Fixtures.requestIDs.count]
            let reply = ServerMessage.history(id: id, entries: entries, truncated: random.next(below: 2) == 0)
            let line = codec.encode(reply)
            #expect(line == codec.encodeWithJSONEncoder(reply), "ACCMON_TEST_SEED=\(seed)")
            #expect(try codec.decodeServerMessage(line.dropLast()) == reply, "ACCMON_TEST_SEED=\(seed)")
        }
    }

    /// Each error names the request and the field, as every request's do.
    @Test(arguments: [
        (#"{"type":"history","limit":0}"#, "invalid-field", "history: limit: 0 is not from 1 to 10000"),
        (#"{"type":"history","limit":10001}"#, "invalid-field", "history: limit: 10001 is not from 1 to 10000"),
        (#"{"type":"history","limit":-3}"#, "invalid-field", "history: limit: -3 is not from 1 to 10000"),
        (
            #"{"type":"history","limit":2.5}"#, "invalid-field",
            "history: limit: expected an integer from \(Int.min) to \(Int.max)"
        ),
        (
            #"{"type":"history","limit":1e2}"#, "invalid-field",
            "history: limit: expected an integer, written without a fraction or an exponent"
        ),
        (#"{"type":"history","limit":"5"}"#, "invalid-field", "history: limit: expected a number"),
        (#"{"type":"history","since":"1h"}"#, "invalid-field", "history: since: expected a number"),
        (
            #"{"type":"history","filter":{"vendorID":"xyz"}}"#, "invalid-field",
            #"history: filter.vendorID: 'xyz' is not a hex id of 1 to 4 digits (such as "0403")"#
        ),
        (
            #"{"type":"history","filter":{"colour":"red"}}"#, "invalid-field",
            "history: filter.colour: unknown filter key (expected kind, vendorID, productID or protocol)"
        ),
    ])
    func badRequestsAreRefusedSayingWhere(line: String, code: String, message: String) {
        let codec = ProtocolCodec()
        guard case .failure(let failure) = codec.decodeClientMessage(Array(line.utf8)) else {
            Issue.record("accepted: \(line)")
            return
        }
        #expect(failure.error.code.rawValue == code, "\(line)")
        #expect(failure.error.message == message, "\(line)")
    }

    /// Absent and null fields take their defaults; `since` may have a fraction.
    @Test func defaultsApply() throws {
        let codec = ProtocolCodec()
        let cases: [(String, HistoryQuery)] = [
            (#"{"type":"history"}"#, HistoryQuery()),
            (#"{"type":"history","limit":null,"since":null,"filter":null}"#, HistoryQuery()),
            (
                #"{"type":"history","since":1796000000.5,"limit":10000,"filter":{"kind":"usb"}}"#,
                HistoryQuery(since: 1_796_000_000.5, limit: 10_000, filter: AccessoryFilter(kind: .usb))
            ),
        ]
        for (line, query) in cases {
            #expect(try codec.decodeClientMessage(Array(line.utf8)).get() == ClientMessage(.history(query)), "\(line)")
        }
    }
}
