import Testing

@testable import AccmondKit

/// The bus thread's judgement of a bus that does not read (``StallWatch``): progress is the bus taking messages, not
/// how many wait.
@Suite struct StallWatchTests {
    let second: UInt64 = 1_000_000_000

    @Test func aBusThatTakesNothingWhileMessagesWaitIsStalledAfterTheStallTime() {
        var watch = StallWatch()
        watch.observe(queued: 0, waiting: true, now: 0)
        watch.sent(queued: 1024)
        for t in 1...29 {
            watch.observe(queued: 1024, waiting: true, now: UInt64(t) * second)
            watch.sent(queued: 1024)
            #expect(!watch.isStalled(after: 30 * second, now: UInt64(t) * second))
        }
        watch.observe(queued: 1024, waiting: true, now: 30 * second)
        #expect(watch.isStalled(after: 30 * second, now: 30 * second))
    }

    @Test func aBusThatReadsSlowlyIsNeverStalledHoweverMuchWaits() {
        var watch = StallWatch()
        var queued: UInt64 = 1024
        watch.observe(queued: queued, waiting: true, now: 0)
        watch.sent(queued: queued)
        // A minute of a bus that takes one message every 10 s of each round's 1,024, a hundred thousand waiting.
        for t in stride(from: 10, through: 600, by: 10) {
            queued -= 1
            watch.observe(queued: queued, waiting: true, now: UInt64(t) * second)
            queued = 1024
            watch.sent(queued: queued)
            #expect(!watch.isStalled(after: 30 * second, now: UInt64(t) * second))
        }
    }

    @Test func nothingWaitingOrAnEmptyQueueIsProgress() {
        var watch = StallWatch()
        watch.observe(queued: 1024, waiting: true, now: 0)
        watch.sent(queued: 1024)
        watch.observe(queued: 1024, waiting: false, now: 40 * second)
        #expect(!watch.isStalled(after: 30 * second, now: 40 * second))
        watch.observe(queued: 0, waiting: true, now: 80 * second)
        #expect(!watch.isStalled(after: 30 * second, now: 80 * second))
        #expect(watch.millisecondsUntilStalled(after: 30 * second, now: 80 * second) == 30_001)
        #expect(watch.millisecondsUntilStalled(after: 30 * second, now: 200 * second) == 1)
    }
}
