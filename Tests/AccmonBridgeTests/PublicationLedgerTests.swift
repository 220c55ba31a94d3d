import AccmonTestSupport
import Testing

@testable import AccmonBridge

@Test func anEventIsReleasedOnlyWithEverythingBeforeIt() {
    var ledger = PublicationLedger<Int>()
    ledger.record(sequence: 1, messages: [10, 11], keeping: 1)
    ledger.record(sequence: nil, messages: [12], keeping: nil)
    ledger.record(sequence: 2, messages: [13, 14], keeping: 2)
    ledger.record(sequence: 3, messages: [], keeping: 3)
    let confirmed = [13, 14].map { ledger.confirm($0) }
    #expect(confirmed == [true, true])
    var released = ledger.releaseDone()
    #expect(released == nil, "2 waits on 1 and on the barrier")
    _ = [10, 11].map { ledger.confirm($0) }
    released = ledger.releaseDone()
    #expect(released == 1)
    let again = ledger.confirm(10)
    #expect(!again, "a message confirmed twice is not the ledger's any more")
    ledger.confirm(12)
    released = ledger.releaseDone()
    #expect(released == 3, "3 had nothing to publish: done with the rest")
    #expect(ledger.count == 0)
}

@Test func aLostConnectionHandsBackWhatWasNotReleased() {
    var ledger = PublicationLedger<Int>()
    for sequence in 1...4 { ledger.record(sequence: UInt64(sequence), messages: [Int32(sequence)], keeping: sequence) }
    ledger.confirm(1)
    ledger.confirm(3)
    let released = ledger.releaseDone()
    #expect(released == 1)
    let kept = ledger.removeAll()
    #expect(kept == [2, 3, 4])
    let known = ledger.confirm(2)
    #expect(!known)
    let after = ledger.releaseDone()
    #expect(after == nil && ledger.count == 0)
}

/// Against a model: after each step, the release is the highest sequence of the longest done prefix.
@Test func releasesFollowTheLongestConfirmedPrefix() {
    var random = SplitMix64(seed: SplitMix64.testSeed())
    for _ in 0..<300 {
        var ledger = PublicationLedger<UInt64>()
        var model: [(sequence: UInt64?, outstanding: Set<Int32>)] = []
        var released = 0
        var nextMessage: Int32 = 1
        var nextSequence: UInt64 = 1
        for _ in 0..<400 {
            if random.next(below: 3) == 0 || model[released...].allSatisfy({ $0.outstanding.isEmpty }) {
                let messages = (0..<random.next(below: 3)).map { _ in
                    defer { nextMessage += 1 }
                    return nextMessage
                }
                let sequence: UInt64? = random.next(below: 5) == 0 ? nil : nextSequence
                if sequence != nil { nextSequence += 1 }
                ledger.record(sequence: sequence, messages: messages, keeping: sequence)
                model.append((sequence, Set(messages)))
            } else {
                let waiting = model.indices.filter { $0 >= released && !model[$0].outstanding.isEmpty }
                let entry = waiting.randomElement(using: &random)!
                let message = model[entry].outstanding.randomElement(using: &random)!
                model[entry].outstanding.remove(message)
                let known = ledger.confirm(message)
                #expect(known)
            }
            var expected: UInt64?
            while released < model.count, model[released].outstanding.isEmpty {
                expected = model[released].sequence ?? expected
                released += 1
            }
            let release = ledger.releaseDone()
            #expect(release == expected)
            #expect(ledger.count == model.count - released)
        }
        let kept = ledger.removeAll()
        #expect(kept == model[released...].compactMap(\.sequence))
    }
}
