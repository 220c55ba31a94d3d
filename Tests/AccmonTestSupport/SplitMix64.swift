import Foundation

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny seeded generator, so that a failing property run can be replayed.
public struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<bound`; `bound` must be positive.
    public mutating func next(below bound: UInt64) -> UInt64 {
        UInt64.random(in: 0..<bound, using: &self)
    }

    /// The seed for a property test: `$ACCMON_TEST_SEED` when set (to replay a failure), else a fresh random one.
    public static func testSeed() -> UInt64 {
        if let text = ProcessInfo.processInfo.environment["ACCMON_TEST_SEED"], let seed = UInt64(text) { return seed }
        return UInt64.random(in: 0...UInt64.max)
    }
}
