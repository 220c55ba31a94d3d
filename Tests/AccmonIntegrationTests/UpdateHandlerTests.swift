import AccmonClient
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

@Suite("AccmonConnection.subscribe(_:includeRejected:onUpdate:)", .timeLimit(.minutes(1)))
struct UpdateHandlerTests {
    /// What a handler received, and on which thread.
    final class Updates: Sendable {
        private let updates = Mutex<[SubscriptionUpdate]>([])
        private let threadNames = Mutex<Set<String>>([])

        func record(_ update: SubscriptionUpdate) {
            // The calling thread's name, as `startThread` set it.
            let threadName = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "unknown"
            threadNames.withLock { _ = $0.insert(threadName.trimmingCharacters(in: .newlines)) }
            updates.withLock { $0.append(update) }
        }

        var all: [SubscriptionUpdate] { updates.withLock { $0 } }
        var threads: Set<String> { threadNames.withLock { $0 } }
        var events: [AccessoryEvent] {
            all.compactMap { update in
                if case .event(let event) = update { return event }
                return nil
            }
        }
    }

    /// Applies `events` to `snapshot` in order; records an issue for an event that repeats or misses an accessory.
    static func apply(_ events: [AccessoryEvent], to snapshot: Snapshot) -> [ConnectionID: Accessory] {
        var present = Dictionary(uniqueKeysWithValues: snapshot.accessories.map { ($0.connectionID, $0) })
        var last = snapshot.sequence
        for event in events {
            #expect(event.sequence > last, "seq \(event.sequence) after \(last)")
            last = event.sequence
            let id = event.accessory.connectionID
            switch event.change {
            case .connect:
                #expect(present[id] == nil, "connect of \(id), which is already present")
                present[id] = event.accessory
            case .disconnect:
                #expect(present.removeValue(forKey: id) != nil, "disconnect of \(id), which is not present")
            }
        }
        return present
    }

    @Test func snapshotFirstThenEventsWithNoGapOrDuplicateWhileAccessoriesComeAndGo() async throws {
        let daemon = try await Accmond.start()
        let bag = ConnectionBag()
        let driver = bag.add(try await daemon.connect("driver"))
        let client = bag.add(try await daemon.connect("handler"))
        var early: [ConnectionID] = []
        for index in 0..<20 {
            early.append(try await driver.simulateConnect(Accessory(kind: .usb, name: "early \(index)")))
        }
        // Plug and unplug while the client subscribes, so that events arrive right behind the snapshot.
        let churn = Task {
            var plugged = early
            for index in 0..<200 {
                if index % 3 == 2, !plugged.isEmpty {
                    try await driver.simulateDisconnect(plugged.removeFirst())
                } else {
                    plugged.append(try await driver.simulateConnect(Accessory(kind: .serial, name: "churn \(index)")))
                }
            }
        }
        let updates = Updates()
        let observation = try await client.subscribe { updates.record($0) }
        guard case .snapshot(let snapshot)? = updates.all.first else {
            Issue.record(
                "the handler's first update is not the snapshot: \(updates.all.first.map { "\($0)" } ?? "none")")
            return
        }
        #expect(snapshot == observation.snapshot)
        try await churn.value

        let truth = try await driver.list()
        if truth.sequence > snapshot.sequence {
            let caughtUp = await eventually { updates.events.last?.sequence == truth.sequence }
            try #require(caughtUp, "the handler did not get the event with seq \(truth.sequence)")
        }
        #expect(updates.all.dropFirst().allSatisfy { if case .event = $0 { true } else { false } })
        let present = Self.apply(updates.events, to: snapshot)
        #expect(present.keys.sorted() == truth.accessories.map(\.connectionID).sorted())
        #expect(updates.threads == ["accmon-reader"], "the handler ran on \(updates.threads)")
    }

    /// The documented order: a disconnect handler has run by the time the subscription's handler gets the event,
    /// for accessories from the snapshot and for those whose handler was registered from the update handler itself.
    @Test func disconnectHandlersRunBeforeTheUpdateHandlerGetsTheDisconnect() async throws {
        let daemon = try await Accmond.start()
        let bag = ConnectionBag()
        let driver = bag.add(try await daemon.connect("driver"))
        let client = bag.add(try await daemon.connect("handler"))
        let count = 100
        var ids: [ConnectionID] = []
        for index in 0..<count {
            ids.append(try await driver.simulateConnect(Accessory(kind: .usb, name: "s\(index)")))
        }
        let disconnected = Mutex<Set<ConnectionID>>([])
        let early = Mutex<[ConnectionID]>([])
        let updates = Updates()
        let observationBox = Mutex<AccessoryObservation?>(nil)
        let observation = try await client.subscribe { update in
            updates.record(update)
            guard case .event(let event) = update else { return }
            let id = event.accessory.connectionID
            switch event.change {
            case .connect:
                observationBox.withLock { $0 }?.onDisconnect(of: event.accessory) { gone in
                    disconnected.withLock { _ = $0.insert(gone.connectionID) }
                }
            case .disconnect:
                if !disconnected.withLock({ $0.contains(id) }) { early.withLock { $0.append(id) } }
            }
        }
        observationBox.withLock { $0 = observation }
        for accessory in observation.snapshot.accessories {
            observation.onDisconnect(of: accessory) { gone in disconnected.withLock { _ = $0.insert(gone.connectionID) }
            }
        }
        for index in 0..<count {
            ids.append(try await driver.simulateConnect(Accessory(kind: .serial, name: "live \(index)")))
        }
        #expect(await eventually { updates.events.count == count })
        // Unplug everything in one burst, so that the reader thread dispatches back to back.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for id in ids { group.addTask { try await driver.simulateDisconnect(id) } }
            try await group.waitForAll()
        }
        #expect(await eventually { updates.events.count == 3 * count })
        #expect(early.withLock { $0 }.isEmpty, "the update handler got these disconnects before their handler ran")
        #expect(disconnected.withLock { $0 } == Set(ids), "some disconnect handler did not run")
    }

    @Test func theDaemonStoppingEndsTheSubscriptionWithDaemonStopped() async throws {
        let daemon = try await Accmond.start()
        let bag = ConnectionBag()
        let driver = bag.add(try await daemon.connect("driver"))
        let client = bag.add(try await daemon.connect("handler"))
        let updates = Updates()
        let observation = try await client.subscribe { updates.record($0) }
        _ = try await driver.simulateConnect(Accessory(kind: .usb, name: "before the stop"))
        #expect(await eventually { updates.events.count == 1 })

        daemon.process.send(SIGTERM)
        do throws(AccmonError) {
            try await observation.waitForEnd()
            Issue.record("waitForEnd returned normally after the daemon stopped")
        } catch {
            #expect(error.code == .daemonStopped, "\(error)")
        }
        #expect(updates.all.count == 2, "updates after the stop: \(updates.all)")
        // Waiting again, after the end, answers at once.
        await #expect(throws: AccmonError.self) { try await observation.waitForEnd() }
    }

    @Test func unsubscribeAndCloseEndTheSubscriptionNormally() async throws {
        let daemon = try await Accmond.start()
        let bag = ConnectionBag()
        let driver = bag.add(try await daemon.connect("driver"))
        let client = bag.add(try await daemon.connect("handler"))
        let updates = Updates()
        let first = try await client.subscribe { updates.record($0) }
        // Cancelling a wait ends the wait, not the subscription.
        let cancelledWait = Task { try await first.waitForEnd() }
        cancelledWait.cancel()
        try await cancelledWait.value
        _ = try await driver.simulateConnect(Accessory(kind: .usb, name: "while subscribed"))
        #expect(await eventually { updates.all.count == 2 }, "\(updates.all)")

        try await client.unsubscribe()
        try await first.waitForEnd()
        _ = try await driver.simulateConnect(Accessory(kind: .usb, name: "after unsubscribe"))
        _ = try await client.status()  // a round trip: the event, had it been sent, would have come before this reply
        #expect(updates.all.count == 2, "updates after unsubscribe: \(updates.all)")

        // The connection subscribes again, with the accessory plugged meanwhile in the snapshot; then it is closed.
        let second = try await client.subscribe { updates.record($0) }
        #expect(second.snapshot.accessories.map(\.name) == ["while subscribed", "after unsubscribe"])
        client.close()
        try await second.waitForEnd()
    }
}
