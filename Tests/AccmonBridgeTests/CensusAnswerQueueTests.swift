import Testing

@testable import AccmonBridge

/// The census answers a claim gateway owes (docs/MQTT.md §5): each at its moment, one per reader, a bounded number.
@Suite struct CensusAnswerQueueTests {
    @Test func answersAreTakenWhenDueEarliestFirst() {
        var queue = CensusAnswerQueue()
        queue.owe(responseTopic: "a", correlation: [1], due: 30)
        queue.owe(responseTopic: "b", correlation: nil, due: 10)
        queue.owe(responseTopic: "c", correlation: [3], due: 20)
        #expect(queue.nextDue == 10)
        #expect(queue.takeDue(now: 5).isEmpty)
        #expect(queue.takeDue(now: 25).map(\.responseTopic) == ["b", "c"])
        #expect(queue.nextDue == 30 && queue.owed.count == 1)
        #expect(queue.takeDue(now: 30).map(\.correlation) == [[1]])
        #expect(queue.nextDue == nil)
    }

    /// A reader's new request replaces what was owed to its last one; past the capacity, the oldest owed goes.
    @Test func oneAnswerPerReaderAndNoMoreThanTheCapacity() {
        var queue = CensusAnswerQueue()
        queue.owe(responseTopic: "r", correlation: [1], due: 100)
        queue.owe(responseTopic: "r", correlation: [2], due: 50)
        #expect(queue.owed == [.init(due: 50, responseTopic: "r", correlation: [2])])
        for reader in 0..<(CensusAnswerQueue.capacity * 3) {
            queue.owe(responseTopic: "reader-\(reader)", correlation: nil, due: UInt64(reader))
        }
        #expect(queue.owed.count == CensusAnswerQueue.capacity)
        #expect(queue.owed.first?.responseTopic == "reader-\(CensusAnswerQueue.capacity * 2)")
    }
}
