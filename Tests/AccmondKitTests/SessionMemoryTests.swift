import AccmonDevices
import AccmonProtocol
import AccmonTestSupport
import Testing

@testable import AccmondKit

@Suite struct SessionMemoryTests {
    func accessory(_ key: String, _ connection: UInt64) -> Accessory {
        Accessory(kind: .serial, accessoryID: key, connectionID: ConnectionID(connection), serialNumber: key)
    }

    @Test func acknowledgementFoldsEventsIntoTheKnownView() {
        var memory = SessionMemory(filter: .all, snapshot: Snapshot(sequence: 10, accessories: [accessory("a", 1)]))
        memory.record(AccessoryEvent(.connect, sequence: 11, accessory: accessory("b", 2)), line: [])
        memory.record(AccessoryEvent(.disconnect, sequence: 12, accessory: accessory("a", 1)), line: [])
        #expect(memory.replay.count == 2)
        memory.acknowledge(11)
        #expect(memory.acknowledged == 11)
        #expect(memory.restoreState.accessories.map(\.accessoryID) == ["a", "b"])
        #expect(memory.replay.events.map(\.sequence) == [12])
        memory.acknowledge(12)
        #expect(memory.restoreState.accessories.map(\.accessoryID) == ["b"])
        #expect(memory.replay.isEmpty)
    }

    @Test func eventsAtOrBeforeTheAcknowledgementAreNotRecorded() {
        var memory = SessionMemory(filter: .all, snapshot: Snapshot(sequence: 10, accessories: []))
        memory.record(AccessoryEvent(.connect, sequence: 9, accessory: accessory("a", 1)), line: [])
        #expect(memory.replay.isEmpty)
    }

    @Test func savedMemoryRoundTrips() {
        var memory = SessionMemory(filter: .all, snapshot: Snapshot(sequence: 3, accessories: [accessory("a", 1)]))
        memory.record(AccessoryEvent(.disconnect, sequence: 4, accessory: accessory("a", 1)), line: [4])
        memory.record(AccessoryEvent(.connect, sequence: 5, accessory: accessory("a", 2)), line: [5])
        let restored = SessionMemory(
            filter: memory.filter, acknowledged: memory.acknowledged, known: memory.restoreState.accessories,
            replay: memory.replay.contents.map { ($0.event, $0.payload) })
        #expect(restored.restoreState == memory.restoreState)
        #expect(restored.replay.events == memory.replay.events)
        #expect(restored.replay.contents.map(\.payload) == [[4], [5]])
    }

    /// Random storms with random acknowledgements: the known view plus the replay is always the truth (what the
    /// client ends with after a restore), and the replay stays within 2 × the number of accessories.
    @Test(arguments: 0..<20)
    func restoreStateAndReplayAlwaysGiveTheTruth(batch: Int) {
        for seed in (UInt64(batch) * 50)..<(UInt64(batch) * 50 + 50) {
            var random = SplitMix64(seed: seed &+ 7_000)
            let accessories = Int.random(in: 1...6, using: &random)
            var registry = Registry()
            var memory = SessionMemory(filter: .all, snapshot: registry.snapshot())
            var delivered: [UInt64] = []
            for _ in 0..<Int.random(in: 10...300, using: &random) {
                if Int.random(in: 0..<5, using: &random) == 0, let upTo = delivered.randomElement(using: &random) {
                    memory.acknowledge(max(upTo, memory.acknowledged))
                    continue
                }
                let key = "k\(Int.random(in: 0..<accessories, using: &random))"
                let events =
                    registry.accessory(under: key) == nil
                    ? registry.attach(key: key, accessory(key, 0)) : registry.detach(key: key)
                for event in events {
                    memory.record(event, line: [])
                    delivered.append(event.sequence)
                }
                #expect(memory.replay.count <= 2 * accessories, "seed \(seed): replay over its bound")
            }
            var view = Dictionary(memory.restoreState.accessories.map { ($0.connectionID, $0) }) { a, _ in a }
            for event in memory.replay.events {
                switch event.change {
                case .connect:
                    #expect(view[event.accessory.connectionID] == nil, "seed \(seed): connect of a known connection")
                    view[event.accessory.connectionID] = event.accessory
                case .disconnect:
                    #expect(view[event.accessory.connectionID] != nil, "seed \(seed): disconnect of an unknown one")
                    view[event.accessory.connectionID] = nil
                }
            }
            #expect(
                Set(view.keys) == Set(registry.snapshot().accessories.map(\.connectionID)),
                "seed \(seed): restore plus replay differs from the truth")
        }
    }
}
