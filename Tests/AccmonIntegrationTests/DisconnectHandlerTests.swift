import AccmonClient
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Synchronization
import Testing

@Suite("AccessorySubscription.onDisconnect(of:perform:)", .timeLimit(.minutes(1)))
struct DisconnectHandlerTests {
    /// Counts handler calls per connection id, and what the consumer had seen when each call came.
    final class Calls: Sendable {
        private let calls = Mutex<[ConnectionID: [Accessory]]>([:])

        func record(_ accessory: Accessory) {
            calls.withLock { $0[accessory.connectionID, default: []].append(accessory) }
        }

        func count(_ id: ConnectionID) -> Int { calls.withLock { $0[id]?.count ?? 0 } }
        func accessories(_ id: ConnectionID) -> [Accessory] { calls.withLock { $0[id] ?? [] } }
    }

    @Test func handlerFiresExactlyOnceOnUnplugAndAtOnceForAnAccessoryAlreadyGone() async throws {
        let daemon = try await Accmond.start()
        let driver = try await daemon.connect("driver")
        let client = try await daemon.connect("handlers")
        defer {
            driver.close()
            client.close()
        }
        let earlyID = try await driver.simulateConnect(Accessory(kind: .serial, name: "early", serialNumber: "E1"))
        let bystanderID = try await driver.simulateConnect(Accessory(kind: .usb, name: "bystander"))
        let subscription = try await client.subscribe()
        let early = try #require(subscription.snapshot.accessories.first { $0.connectionID == earlyID })
        let bystander = try #require(subscription.snapshot.accessories.first { $0.connectionID == bystanderID })
        var events = subscription.makeAsyncIterator()
        let calls = Calls()

        // 1. An accessory from the snapshot: registered now, fires once when unplugged, before the event reaches us.
        subscription.onDisconnect(of: early) { calls.record($0) }
        subscription.onDisconnect(of: bystander) { calls.record($0) }
        #expect(calls.count(earlyID) == 0, "the handler ran before the accessory was unplugged")
        try await driver.simulateDisconnect(earlyID)
        let gone = try #require(try await events.next())
        #expect(gone.change == .disconnect && gone.accessory.connectionID == earlyID, "\(gone)")
        #expect(calls.count(earlyID) == 1, "handler calls when the disconnect event reached the consumer")
        #expect(calls.accessories(earlyID).first == early, "the handler got another accessory")

        // 2. An accessory that connected after subscribing (known from a live event).
        let lateID = try await driver.simulateConnect(Accessory(kind: .bluetoothHID, name: "late"))
        let came = try #require(try await events.next())
        #expect(came.change == .connect && came.accessory.connectionID == lateID, "\(came)")
        subscription.onDisconnect(of: came.accessory) { calls.record($0) }
        try await driver.simulateDisconnect(lateID)
        let left = try #require(try await events.next())
        #expect(left.change == .disconnect && left.accessory.connectionID == lateID, "\(left)")
        #expect(calls.count(lateID) == 1)

        // 3. Exactly once: more traffic, including a new connection of the same physical accessory, fires nothing.
        let replugID = try await driver.simulateConnect(Accessory(kind: .serial, name: "early", serialNumber: "E1"))
        try await driver.simulateDisconnect(replugID)
        for _ in 0..<2 { _ = try #require(try await events.next()) }
        #expect(calls.count(earlyID) == 1, "the handler fired again")
        #expect(calls.count(lateID) == 1, "the handler fired again")
        #expect(calls.count(replugID) == 0, "a handler fired for a connection nobody registered")
        #expect(calls.count(bystanderID) == 0, "the bystander's handler fired though it is still connected")

        // 4. For an accessory already gone, the handler runs at once, before onDisconnect returns.
        subscription.onDisconnect(of: early) { calls.record($0) }
        #expect(calls.count(earlyID) == 2, "no immediate call for an accessory already gone")
        subscription.onDisconnect(of: came.accessory) { calls.record($0) }
        #expect(calls.count(lateID) == 2, "no immediate call for an accessory already gone")

        // 5. The bystander's handler fires when it finally goes.
        try await driver.simulateDisconnect(bystanderID)
        let last = try #require(try await events.next())
        #expect(last.accessory.connectionID == bystanderID)
        #expect(calls.count(bystanderID) == 1)
    }

    /// The documented order, many times over: the handler has run by the time the consumer sees the disconnect.
    @Test func handlerRunsBeforeTheDisconnectEventReachesTheConsumer() async throws {
        let daemon = try await Accmond.start()
        let driver = try await daemon.connect("driver")
        let client = try await daemon.connect("handlers")
        defer {
            driver.close()
            client.close()
        }
        let count = 200
        var ids: [ConnectionID] = []
        for index in 0..<count {
            ids.append(try await driver.simulateConnect(Accessory(kind: .usb, name: "h\(index)")))
        }
        let subscription = try await client.subscribe()
        #expect(subscription.snapshot.accessories.map(\.connectionID) == ids)
        let calls = Calls()
        for accessory in subscription.snapshot.accessories {
            subscription.onDisconnect(of: accessory) { calls.record($0) }
        }
        // Unplug everything in one burst, so that the reader thread dispatches back to back.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for id in ids { group.addTask { try await driver.simulateDisconnect(id) } }
            try await group.waitForAll()
        }
        var early: [ConnectionID] = []
        var seen = 0
        for try await event in subscription {
            #expect(event.change == .disconnect)
            if calls.count(event.accessory.connectionID) != 1 { early.append(event.accessory.connectionID) }
            seen += 1
            if seen == count { break }
        }
        #expect(
            early.isEmpty,
            "\(early.count) of \(count) disconnect events reached the consumer before their handler ran: \(early.prefix(10))"
        )
        #expect(ids.allSatisfy { calls.count($0) == 1 }, "some handler did not run exactly once")
    }
}
