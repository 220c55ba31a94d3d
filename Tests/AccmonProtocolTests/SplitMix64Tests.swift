import AccmonTestSupport
import Testing

@Test func splitMix64GivesTheReferenceSequence() {
    // The first outputs for seed 1234567 of the reference implementation (prng.di.unimi.it/splitmix64.c).
    var generator = SplitMix64(seed: 1_234_567)
    #expect(generator.next() == 6_457_827_717_110_365_317)
    #expect(generator.next() == 3_203_168_211_198_807_973)
    #expect(generator.next() == 9_817_491_932_198_370_423)
}
