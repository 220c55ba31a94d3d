import AccmonTestSupport
import Testing

@testable import AccmonProtocol

/// The hand-written event line must be byte for byte what JSONEncoder writes, for any accessory.
@Suite struct EventLineWriterTests {
    @Test(arguments: [Fixtures.fullAccessory, Fixtures.awkwardAccessory, Fixtures.minimalAccessory])
    func matchesJSONEncoderForFixtures(accessory: Accessory) {
        let codec = ProtocolCodec()
        for event in [
            AccessoryEvent(.connect, sequence: 0, accessory: accessory),
            AccessoryEvent(.connect, sequence: 1, accessory: accessory),
            AccessoryEvent(.connect, sequence: 10, accessory: accessory),
            AccessoryEvent(.disconnect, sequence: 1_000_000_000_000_000_000, accessory: accessory),
            AccessoryEvent(.disconnect, sequence: UInt64.max, accessory: accessory),
            AccessoryEvent(.connect, sequence: 7, accessory: accessory, rejection: "no \"entry\"\n\\ matches/"),
        ] {
            #expect(codec.encode(.event(event)) == codec.encodeWithJSONEncoder(.event(event)))
        }
    }

    /// A line longer than the stack space the writer starts in (1 KiB) moves to the heap whole.
    @Test func aLineLongerThanItsStackStartIsWhole() {
        let codec = ProtocolCodec()
        let name = String(repeating: "long \"name\" \u{1}é ", count: 400)
        let event = AccessoryEvent(.connect, sequence: 3, accessory: Accessory(kind: .usb, name: name))
        let line = codec.encode(.event(event))
        #expect(line.count > 8 * 1024)
        #expect(line == codec.encodeWithJSONEncoder(.event(event)))
    }

    @Test func matchesJSONEncoderForRandomStrings() {
        var random = SplitMix64(seed: 2026)
        let codec = ProtocolCodec()
        for _ in 0..<2_000 {
            let event = Fixtures.randomEvent(using: &random)
            #expect(codec.encode(.event(event)) == codec.encodeWithJSONEncoder(.event(event)), "\(event)")
        }
    }

    /// The accessory object given with the line (for the history file) is the bytes the line holds between
    /// `{"accessory":` and the next key, and a history entry written with them is the entry written whole.
    @Test func theAccessoryObjectGivenWithTheLineIsTheOneTheHistoryWrites() {
        var random = SplitMix64(seed: 2027)
        let codec = ProtocolCodec()
        for _ in 0..<500 {
            let event = Fixtures.randomEvent(using: &random)
            let (line, object) = codec.encodeEvent(event)
            #expect(line == codec.encode(.event(event)))
            #expect(Array(line.prefix(13)) == Array(#"{"accessory":"#.utf8) && object.startIndex == 13)
            var alone = JSONOutput(capacity: 256)
            EventLineWriter.accessory(event.accessory, into: &alone)
            let objectAlone = alone.bytes()
            #expect(Array(object) == objectAlone)
            let entry = HistoryEntry(
                seq: event.sequence, time: 1_796_000_000.25, kind: .connect, accessory: event.accessory,
                eventSeq: event.sequence, actor: nil, holder: nil, reason: event.rejection)
            var whole = JSONOutput(capacity: 256)
            HistoryLineWriter.entry(entry, into: &whole)
            var copied = JSONOutput(capacity: 256)
            HistoryLineWriter.entry(entry, accessoryObject: object, into: &copied)
            let (copiedBytes, wholeBytes) = (copied.bytes(), whole.bytes())
            #expect(copiedBytes == wholeBytes)
        }
    }
}
