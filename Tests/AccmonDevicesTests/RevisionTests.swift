import AccmonProtocol
import AccmonTestSupport
import Testing

@testable import AccmonDevices

/// The firmware revision is built byte by byte on every USB device's add; it must equal the plain form below.
@Suite("Firmware revision from bcdDevice")
struct RevisionTests {
    static func referenceRevision(_ bcd: String) -> String {
        let digits = Array(bcd.utf8)
        guard digits.count == 4, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return bcd }
        let major = digits[0] == UInt8(ascii: "0") ? digits[1...1] : digits[0...1]
        return String(decoding: major + [UInt8(ascii: ".")] + digits[2...3], as: UTF8.self)
    }

    @Test func revisionsEqualThePlainForm() {
        for number in 0..<10_000 {
            let bcd = String(repeating: "0", count: 4 - String(number).count) + String(number)
            #expect(DeviceClassifier.revision(bcd) == Self.referenceRevision(bcd), "\(bcd)")
        }
        var random = SplitMix64(seed: SplitMix64.testSeed())
        let alphabet = Array("0109a.é ".unicodeScalars)
        for _ in 0..<5_000 {
            let text = String(
                String.UnicodeScalarView(
                    (0..<Int(random.next(below: 6))).map { _ in
                        alphabet[Int(random.next(below: UInt64(alphabet.count)))]
                    }
                ))
            #expect(DeviceClassifier.revision(text) == Self.referenceRevision(text), "\(text.debugDescription)")
        }
    }
}
