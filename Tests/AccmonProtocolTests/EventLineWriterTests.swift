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
}
