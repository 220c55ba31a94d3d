import AccmonClient
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Synchronization
import Testing

/// Tasks that prefer a connection's reader executor run on its reader thread, between its reads of the socket.
@Suite("AccmonConnection.readerExecutor", .timeLimit(.minutes(1)))
struct ReaderExecutorTests {
    /// The calling thread's name, as `startThread` set it (the reader thread is `accmon-reader`).
    static func threadName() -> String {
        ((try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? "unknown")
            .trimmingCharacters(in: .newlines)
    }

    @Test func aLoopThatPrefersItGetsEveryEventOnTheReaderThreadAndMayAwaitRequests() async throws {
        let daemon = try await Accmond.start()
        let bag = ConnectionBag()
        let driver = bag.add(try await daemon.connect("driver"))
        let client = bag.add(try await daemon.connect("executor"))
        let subscription = try await client.subscribe()
        let consumer = Task {
            try await withTaskExecutorPreference(client.readerExecutor) {
                var seen: [(event: AccessoryEvent, thread: String, listed: Int)] = []
                for try await event in subscription {
                    // A request from inside the loop: the reader thread must go on reading to get its reply.
                    let listed = try await client.list().accessories.count
                    seen.append((event, Self.threadName(), listed))
                    if seen.count == 6 { break }
                }
                return seen
            }
        }
        var ids: [ConnectionID] = []
        for index in 0..<3 { ids.append(try await driver.simulateConnect(Accessory(kind: .usb, name: "x\(index)"))) }
        for id in ids { try await driver.simulateDisconnect(id) }
        let seen = try await consumer.value
        #expect(seen.map(\.thread) == Array(repeating: "accmon-reader", count: 6))
        #expect(seen.map(\.event.change) == [.connect, .connect, .connect, .disconnect, .disconnect, .disconnect])
        #expect(seen.map(\.event.accessory.connectionID) == ids + ids)
        #expect(seen.allSatisfy { (0...3).contains($0.listed) })
    }

    /// A storm of plugs from concurrent drivers: the loop on the reader thread gets every event once, in sequence
    /// order, and the snapshot plus the events equal the daemon's list at the end.
    @Test func aStormReachesTheLoopWholeAndInOrder() async throws {
        let daemon = try await Accmond.start()
        let bag = ConnectionBag()
        let client = bag.add(try await daemon.connect("executor"))
        let drivers = [bag.add(try await daemon.connect("driver 1")), bag.add(try await daemon.connect("driver 2"))]
        let subscription = try await client.subscribe()
        let received = Mutex<[AccessoryEvent]>([])
        let consumer = Task {
            try await withTaskExecutorPreference(client.readerExecutor) {
                for try await event in subscription {
                    #expect(Self.threadName() == "accmon-reader")
                    received.withLock { $0.append(event) }
                }
            }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (number, driver) in drivers.enumerated() {
                group.addTask {
                    var plugged: [ConnectionID] = []
                    for index in 0..<400 {
                        if index % 3 == 2 {
                            try await driver.simulateDisconnect(plugged.removeFirst())
                        } else {
                            plugged.append(
                                try await driver.simulateConnect(Accessory(kind: .usb, name: "d\(number) \(index)")))
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        let truth = try await drivers[0].list()
        let caughtUp = await eventually { received.withLock { $0.last?.sequence } == truth.sequence }
        try #require(caughtUp, "the loop did not get the event with seq \(truth.sequence)")
        client.close()
        try await consumer.value
        let events = received.withLock { $0 }
        #expect(events.count == 800)
        #expect(zip(events, events.dropFirst()).allSatisfy { $0.sequence < $1.sequence })
        var present = Set(subscription.snapshot.accessories.map(\.connectionID))
        for event in events {
            switch event.change {
            case .connect: #expect(present.insert(event.accessory.connectionID).inserted)
            case .disconnect: #expect(present.remove(event.accessory.connectionID) != nil)
            }
        }
        #expect(present == Set(truth.accessories.map(\.connectionID)))
    }

    /// With nothing to read, only the executor's own wake-up brings a task started elsewhere onto the reader thread.
    @Test func aTaskStartedOnAnotherThreadWakesTheIdleReader() async throws {
        let daemon = try await Accmond.start()
        let client = try await daemon.connect("executor")
        defer { client.close() }
        let names = await withTaskExecutorPreference(client.readerExecutor) {
            var names: [String] = []
            for _ in 0..<20 {
                names.append(Self.threadName())
                try? await Task.sleep(for: .milliseconds(1))  // resumed from the timer's thread
            }
            return names
        }
        #expect(names == Array(repeating: "accmon-reader", count: 20))
    }

    /// A task that keeps yielding does not keep the reader from the socket: a reply still arrives.
    @Test func aTaskThatKeepsYieldingDoesNotStarveTheSocket() async throws {
        let daemon = try await Accmond.start()
        let client = try await daemon.connect("executor")
        defer { client.close() }
        let stop = Atomic<Bool>(false)
        let turns = Atomic<Int>(0)
        let spinner = Task {
            await withTaskExecutorPreference(client.readerExecutor) {
                while !stop.load(ordering: .relaxed) {
                    turns.add(1, ordering: .relaxed)
                    await Task.yield()
                }
            }
        }
        defer { stop.store(true, ordering: .relaxed) }
        try #require(await eventually { turns.load(ordering: .relaxed) > 0 }, "the spinner never ran")
        let before = turns.load(ordering: .relaxed)
        // Requests from a task on the reader thread too, so that their replies need the socket read between yields.
        let statuses = try await withTaskExecutorPreference(client.readerExecutor) {
            var count = 0
            for _ in 0..<5 {
                _ = try await client.status()
                count += 1
            }
            return count
        }
        #expect(statuses == 5)
        #expect(turns.load(ordering: .relaxed) > before, "the spinner stopped while the requests went through")
        stop.store(true, ordering: .relaxed)
        await spinner.value
    }

    /// Once the connection has ended, a task that prefers its executor still runs, on the global executor.
    @Test func afterTheConnectionEndsItsTasksRunElsewhere() async throws {
        let daemon = try await Accmond.start()
        let client = try await daemon.connect("executor")
        let subscription = try await client.subscribe()
        client.close()
        for try await _ in subscription {}
        let names = await withTaskExecutorPreference(client.readerExecutor) {
            var names: [String] = []
            for _ in 0..<5 {
                try? await Task.sleep(for: .milliseconds(1))
                names.append(Self.threadName())
            }
            return names
        }
        #expect(names.count == 5)
        #expect(!names.contains("accmon-reader"))
    }
}
