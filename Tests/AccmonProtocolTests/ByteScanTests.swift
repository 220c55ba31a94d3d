import AccmonTestSupport
import Testing

@_spi(AccmonInternals) @testable import AccmonProtocol

/// The eight-byte tests must say exactly what a byte-by-byte look at the same bytes says.
@Suite struct ByteScanTests {
    /// Random bytes, most of them from the values at the edges of what the tests look for.
    static func randomBytes(_ count: Int, using random: inout SplitMix64) -> [UInt8] {
        let edges: [UInt8] = [0x00, 0x01, 0x0A, 0x0D, 0x1F, 0x20, 0x21, 0x22, 0x5B, 0x5C, 0x5D, 0x7F, 0x80, 0xFF, 0x61]
        return (0..<count).map { _ in
            random.next() % 4 == 0 ? UInt8(truncatingIfNeeded: random.next()) : edges[Int(random.next() % 15)]
        }
    }

    @Test func wordTestsAgreeWithEachByte() {
        var random = SplitMix64(seed: 5)
        for _ in 0..<20_000 {
            let bytes = Self.randomBytes(8, using: &random)
            let word = bytes.withUnsafeBufferPointer { ByteScan.word($0, at: 0) }
            let limit = UInt8(random.next() % 0x81)
            #expect(ByteScan.hasByte(below: limit, in: word) == bytes.contains { $0 < limit }, "\(bytes) < \(limit)")
            let target = bytes[Int(random.next() % 8)] &+ UInt8(random.next() % 2)
            #expect(ByteScan.hasByte(target, in: word) == bytes.contains(target), "\(bytes) has \(target)")
            #expect(
                ByteScan.hasJSONSpecial(word)
                    == bytes.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") })
            #expect(ByteScan.hasNonASCII(word) == bytes.contains { $0 >= 0x80 })
            // The lowest flag marks the first such byte.
            func firstFlagged(_ flags: UInt64) -> Int? { flags == 0 ? nil : flags.trailingZeroBitCount / 8 }
            #expect(
                firstFlagged(ByteScan.flags(ofBytesBelow: limit, in: word)) == bytes.firstIndex { $0 < limit },
                "\(bytes) < \(limit)")
            #expect(
                firstFlagged(ByteScan.flags(ofByte: target, in: word)) == bytes.firstIndex(of: target),
                "\(bytes) has \(target)")
        }
    }

    @Test func firstIndexAgreesWithTheStandardLibrary() {
        var random = SplitMix64(seed: 9)
        for _ in 0..<5_000 {
            let bytes = Self.randomBytes(Int(random.next() % 40), using: &random)
            let start = bytes.isEmpty ? 0 : Int(random.next() % UInt64(bytes.count))
            let target: UInt8 = random.next() % 2 == 0 ? 0x0A : 0x22
            let found = bytes.withUnsafeBufferPointer { ByteScan.firstIndex(of: target, in: $0, from: start) }
            #expect(found == bytes[start...].firstIndex(of: target), "\(bytes) from \(start)")
        }
    }
}
