import AccmonDevices
import AccmonProtocol
import AccmonTestSupport
import Testing

@testable import AccmondKit

@Suite struct CoalescingQueueTests {
    func event(
        _ change: AccessoryEvent.Change, _ connection: UInt64, accessory: String = "a", seq: UInt64
    )
        -> AccessoryEvent
    {
        AccessoryEvent(
            change, sequence: seq,
            accessory: Accessory(kind: .usb, accessoryID: accessory, connectionID: ConnectionID(connection)))
    }

    @Test func connectThenDisconnectOfAnUnseenConnectionVanishes() {
        var queue = CoalescingQueue<Int>()
        queue.enqueue(event(.connect, 1, seq: 1), payload: 1)
        queue.enqueue(event(.disconnect, 1, seq: 2), payload: 2)
        #expect(queue.isEmpty)
        #expect(queue.popFirst() == nil)
    }

    @Test func disconnectOfASeenConnectionThenReconnectAreBothKeptInOrder() {
        var queue = CoalescingQueue<Int>()
        queue.enqueue(event(.disconnect, 1, seq: 1), payload: 1)
        queue.enqueue(event(.connect, 2, seq: 2), payload: 2)
        queue.enqueue(event(.disconnect, 2, seq: 3), payload: 3)
        queue.enqueue(event(.connect, 3, seq: 4), payload: 4)
        #expect(queue.events.map(\.sequence) == [1, 4])
        #expect(queue.removeAll().map(\.payload) == [1, 4])
    }

    @Test func otherAccessoriesKeepTheirPlace() {
        var queue = CoalescingQueue<Int>()
        queue.enqueue(event(.connect, 1, accessory: "a", seq: 1), payload: 0)
        queue.enqueue(event(.connect, 2, accessory: "b", seq: 2), payload: 0)
        queue.enqueue(event(.disconnect, 1, accessory: "a", seq: 3), payload: 0)
        queue.enqueue(event(.connect, 3, accessory: "a", seq: 4), payload: 0)
        #expect(queue.events.map(\.sequence) == [2, 4])
        #expect(queue.popFirst()?.event.sequence == 2)
        #expect(queue.first?.event.sequence == 4)
        #expect(queue.count == 1)
    }

    /// A client's view, the daemon's truth, and a random storm with suspensions, checked after every resume:
    /// (a) the view equals the truth, (b) every disconnect received is for a connection the client saw connect,
    /// (c) no pair that began and ended while suspended reaches the client, (d) per accessory, events arrive in
    /// their original order, (e) the queue never holds more than 2 × the number of distinct accessories.
    @Test(arguments: 0..<40)
    func randomStormsWithSuspensionsKeepEveryPromise(batch: Int) {
        for seed in (UInt64(batch) * 100)..<(UInt64(batch) * 100 + 100) {
            checkStorm(seed: seed)
        }
    }

    func checkStorm(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let accessories = Int.random(in: 1...8, using: &random)
        var registry = Registry()
        var queue = CoalescingQueue<UInt64>()
        var suspended = false
        var view: Set<ConnectionID> = []
        var lastSequenceSeen: [String: UInt64] = [:]
        let steps = Int.random(in: 20...400, using: &random)

        func receive(_ event: AccessoryEvent) -> Bool {
            let id = event.accessory.connectionID
            let key = event.accessory.accessoryID
            if let last = lastSequenceSeen[key], last >= event.sequence {
                Issue.record("seed \(seed): event \(event.sequence) for \(key) after \(last): order broken (d)")
                return false
            }
            lastSequenceSeen[key] = event.sequence
            switch event.change {
            case .connect:
                guard view.insert(id).inserted else {
                    Issue.record("seed \(seed): connect of \(id) already in view")
                    return false
                }
            case .disconnect:
                guard view.remove(id) != nil else {
                    Issue.record("seed \(seed): disconnect of \(id), never seen connected (b)")
                    return false
                }
            }
            return true
        }

        for _ in 0..<steps {
            switch Int.random(in: 0..<10, using: &random) {
            case 0:
                if !suspended {
                    suspended = true
                }
            case 1:
                if suspended {
                    suspended = false
                    var connectsDelivered: Set<ConnectionID> = []
                    for entry in queue.removeAll() {
                        let id = entry.event.accessory.connectionID
                        if entry.event.change == .connect { connectsDelivered.insert(id) }
                        // (c): a connection born during the suspension is never both connected and disconnected.
                        if entry.event.change == .disconnect, connectsDelivered.contains(id) {
                            Issue.record("seed \(seed): both halves of \(id) delivered after a suspension (c)")
                            return
                        }
                        guard receive(entry.event) else { return }
                    }
                    let truth = Set(registry.snapshot().accessories.map(\.connectionID))
                    guard view == truth else {
                        Issue.record(
                            "seed \(seed): after resume the view \(view.sorted()) differs from \(truth.sorted()) (a)")
                        return
                    }
                }
            default:
                let index = Int.random(in: 0..<accessories, using: &random)
                let key = "dev\(index)"
                let events: [AccessoryEvent]
                if registry.accessory(under: key) == nil {
                    events = registry.attach(
                        key: key, Accessory(kind: .usb, accessoryID: key, serialNumber: key))
                } else {
                    events = registry.detach(key: key)
                }
                for event in events {
                    if suspended {
                        queue.enqueue(event, payload: event.sequence)
                        guard queue.count <= 2 * accessories else {
                            Issue.record("seed \(seed): queue holds \(queue.count) for \(accessories) accessories (e)")
                            return
                        }
                    } else {
                        guard receive(event) else { return }
                    }
                }
            }
        }
    }
}
