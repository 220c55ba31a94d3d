import AccmonClient
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

@Suite("Fan-out to many clients", .timeLimit(.minutes(1)))
struct FanOutTests {
    static let clientCount = 100
    static let eventCount = 50

    @Test func hundredSubscribersEachReceiveEveryEventInOrderWithTheSameSequenceNumbers() async throws {
        let daemon = try await Accmond.start()
        let bag = ConnectionBag()

        // 100 clients connect and subscribe at the same time.
        let logs = try await withThrowingTaskGroup(of: EventLog.self) { group in
            for index in 0..<Self.clientCount {
                group.addTask {
                    let connection = bag.add(try await daemon.connect("fan-out-\(index)"))
                    return EventLog(try await connection.subscribe())
                }
            }
            var logs: [EventLog] = []
            for try await log in group { logs.append(log) }
            return logs
        }
        #expect(logs.count == Self.clientCount)
        for log in logs { #expect(log.snapshot == Snapshot(sequence: 0, accessories: [])) }

        let driver = bag.add(try await daemon.connect("driver"))
        #expect(try await driver.status().sessions == Self.clientCount + 1)
        var plugged: [ConnectionID] = []
        for index in 0..<Self.eventCount {
            let accessory = Accessory(
                kind: .serial, name: "fan-out \(index)", serialNumber: "FO\(index)", vendorID: "0403",
                productID: "6001", deviceNodes: ["/dev/ttyUSB\(index)"])
            plugged.append(try await driver.simulateConnect(accessory))
        }
        #expect(plugged == (1...Self.eventCount).map { ConnectionID(UInt64($0)) }, "connection ids are not 1...50")
        let finalSequence = try await driver.status().sequence
        #expect(finalSequence == UInt64(Self.eventCount))

        for log in logs {
            let complete = await log.waitForCount(Self.eventCount, timeout: .seconds(20))
            #expect(complete, "a client got \(log.count) of \(Self.eventCount) events within 20 s")
        }
        let reference = logs[0].events
        #expect(reference.map(\.sequence) == (1...UInt64(Self.eventCount)).map { $0 }, "client 0's sequence numbers")
        #expect(reference.map(\.change) == Array(repeating: .connect, count: Self.eventCount))
        #expect(reference.map(\.accessory.connectionID) == plugged)
        #expect(reference.map(\.accessory.name) == (0..<Self.eventCount).map { "fan-out \($0)" })
        for (index, log) in logs.enumerated() {
            let events = log.events
            #expect(
                events == reference,
                "client \(index) saw other events than client 0: \(events.map(\.sequence)) vs \(reference.map(\.sequence))"
            )
        }
        bag.closeAll()
    }
}
