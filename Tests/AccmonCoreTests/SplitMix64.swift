import Testing

/// A small seeded generator (Steele, Lea and Flood's SplitMix64): the same seed gives the same sequence everywhere,
/// so a failing property run can be replayed from its printed seed.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<bound`; `bound` must be positive.
    mutating func next(below bound: UInt64) -> UInt64 {
        UInt64.random(in: 0..<bound, using: &self)
    }
}

@Test func splitMix64GivesTheReferenceSequence() {
    // The first outputs for seed 1234567 of the reference implementation (prng.di.unimi.it/splitmix64.c).
    var generator = SplitMix64(seed: 1_234_567)
    #expect(generator.next() == 6_457_827_717_110_365_317)
    #expect(generator.next() == 3_203_168_211_198_807_973)
    #expect(generator.next() == 9_817_491_932_198_370_423)
}
