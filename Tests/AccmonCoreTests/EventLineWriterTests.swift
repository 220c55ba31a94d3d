@testable import AccmonCore
import AccmonTestSupport
import Testing

/// The hand-written event line must be byte for byte what JSONEncoder writes, for any accessory.
@Suite struct EventLineWriterTests {
    @Test(arguments: [Fixtures.fullAccessory, Fixtures.awkwardAccessory, Fixtures.minimalAccessory])
    func matchesJSONEncoderForFixtures(accessory: Accessory) {
        let codec = ProtocolCodec()
        for event in [
            AccessoryEvent(.connect, sequence: 1, accessory: accessory),
            AccessoryEvent(.disconnect, sequence: UInt64.max, accessory: accessory),
            AccessoryEvent(.connect, sequence: 7, accessory: accessory, rejection: "no \"entry\"\n\\ matches/"),
        ] {
            #expect(codec.encode(.event(event)) == codec.encodeWithJSONEncoder(.event(event)))
        }
    }

    @Test func matchesJSONEncoderForRandomStrings() {
        var random = SplitMix64(seed: 2026)
        let codec = ProtocolCodec()
        let alphabet: [Unicode.Scalar] =
            (0..<0x20).map { Unicode.Scalar($0)! } + ["\"", "\\", "/", "\u{7F}", "é", "\u{2028}", "😀", "a", " "]
        func text() -> String {
            var value = ""
            for _ in 0..<Int.random(in: 0...12, using: &random) {
                value.unicodeScalars.append(alphabet.randomElement(using: &random)!)
            }
            return value
        }
        for _ in 0..<2_000 {
            let accessory = Accessory(
                kind: AccessoryKind.allCases.randomElement(using: &random)!, accessoryID: text(),
                connectionID: ConnectionID(random.next()), name: text(), manufacturer: text(), modelNumber: text(),
                serialNumber: text(), firmwareRevision: text(), hardwareRevision: text(), vendorID: text(),
                productID: text(), protocolStrings: (0..<Int.random(in: 0...3, using: &random)).map { _ in text() },
                deviceNodes: (0..<Int.random(in: 0...3, using: &random)).map { _ in text() }, sysfsPath: text(),
                portPath: text(), interfaceNumber: text(), descriptorsSHA256: text())
            let event = AccessoryEvent(
                Bool.random(using: &random) ? .connect : .disconnect, sequence: random.next(), accessory: accessory,
                rejection: Bool.random(using: &random) ? text() : nil)
            #expect(codec.encode(.event(event)) == codec.encodeWithJSONEncoder(.event(event)), "\(event)")
        }
    }
}
