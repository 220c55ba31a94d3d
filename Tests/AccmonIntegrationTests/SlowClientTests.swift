import AccmonClient
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

/// A client that stops reading must not hold up anyone else, and must not make the daemon hold unbounded data.
///
/// Since commit ea62c8e ("Suspension: ... implicit when a client stops reading; coalescing queue") the daemon
/// suspends such a client and coalesces its events instead of disconnecting it; this test pins that behaviour.
@Suite("A client that stops reading", .timeLimit(.minutes(1)))
struct SlowClientTests {
    static let bufferLimit = 65_536
    /// Accessories that stay connected while the storm runs (each can leave at most 2 events in a coalesced queue).
    static let keepers = 30
    /// Connect-then-disconnect pairs; each line carries a 2 KB name, so ~3.5 MB in all: far past the kernel's socket
    /// buffer plus the 64 KiB bound.
    static let pairs = 800

    @Test func clientThatStopsReadingIsSuspendedAndDoesNotHoldUpOthers() async throws {
        let daemon = try await Accmond.start(arguments: ["--max-client-buffer", String(Self.bufferLimit)])
        let bag = ConnectionBag()
        let codec = ProtocolCodec()

        // The slow client: subscribes, reads the replies to hello and subscribe, then stops reading.
        let slow = try RawSocket(path: daemon.socketPath)
        slow.setReceiveBufferSize(4096)
        try slow.send(#"{"type":"hello","id":1,"versions":[1],"client":"slow"}"# + "\n")
        let hello = try #require(await slow.readObject(), "slow client: no hello reply")
        let slowSession = try #require(
            hello["session"] as? String, "slow client: hello reply without session: \(hello)")
        try slow.send(#"{"type":"subscribe","id":2}"# + "\n")
        let snapshotLine = try #require(await slow.readLine(), "slow client: no snapshot")
        guard case .snapshot(_, let slowSnapshot) = try codec.decodeServerMessage(Array(snapshotLine.utf8)) else {
            Issue.record("slow client: expected a snapshot, got \(snapshotLine)")
            return
        }

        let fastConnection = bag.add(try await daemon.connect("fast"))
        let fast = EventLog(try await fastConnection.subscribe())
        let driver = bag.add(try await daemon.connect("driver"))

        let longName = String(repeating: "long accessory name ", count: 100)
        let clock = ContinuousClock()
        var slowestCatchUp = Duration.zero
        var keeperIDs: [ConnectionID] = []
        var expectedEvents = 0
        for pair in 0..<Self.pairs {
            if pair % (Self.pairs / Self.keepers) == 0 && keeperIDs.count < Self.keepers {
                keeperIDs.append(
                    try await driver.simulateConnect(
                        Accessory(kind: .serial, name: "keeper \(keeperIDs.count) \(longName)", vendorID: "0403")))
                expectedEvents += 1
            }
            let id = try await driver.simulateConnect(
                Accessory(kind: .usb, name: "\(pair) \(longName)", serialNumber: "S\(pair)", vendorID: "0403"))
            try await driver.simulateDisconnect(id)
            expectedEvents += 2
            // A fast client is one that keeps up: let it catch up every 10 pairs (~45 KB), below the 64 KiB bound,
            // so that only the client that does not read at all passes it.
            if pair % 10 == 9 {
                let waitStarted = clock.now
                let caughtUp = await fast.waitForCount(expectedEvents, timeout: .seconds(5))
                slowestCatchUp = max(slowestCatchUp, clock.now - waitStarted)
                try #require(caughtUp, "the fast client fell behind: \(fast.count) of \(expectedEvents) events")
            }
        }
        // Half the keepers leave while the slow client is still not reading.
        for id in keeperIDs.prefix(Self.keepers / 2) {
            try await driver.simulateDisconnect(id)
            expectedEvents += 1
        }

        // The fast client gets everything, promptly and in order.
        let pushed = clock.now
        let complete = await fast.waitForCount(expectedEvents, timeout: .seconds(10))
        #expect(complete, "fast client received \(fast.count) of \(expectedEvents) events")
        #expect(clock.now - pushed < .seconds(5), "fast client took \(clock.now - pushed) after the last event")
        #expect(slowestCatchUp < .seconds(3), "the fast client once needed \(slowestCatchUp) to catch up 20 events")
        let sequences = fast.events.map(\.sequence)
        let inOrder = sequences == (1...UInt64(expectedEvents)).map { $0 }
        #expect(inOrder, "fast client: \(sequences.count) events, not 1...\(expectedEvents) in order")
        #expect(fast.error == nil && !fast.ended, "the fast client's stream ended: \(String(describing: fast.error))")

        // The daemon still answers at once; it holds the slow client suspended, with bounded data.
        let status = try await driver.status()
        #expect(status.sequence == UInt64(expectedEvents))
        let slowStatus = try #require(status.clients.first { $0.sessionID == slowSession }, "\(status.clients)")
        #expect(slowStatus.state == .suspended, "\(slowStatus)")
        #expect(slowStatus.suspendedBecause == "not-reading", "\(slowStatus)")
        #expect(slowStatus.subscribed)
        #expect(slowStatus.outboundBytes <= Self.bufferLimit + 4096, "\(slowStatus)")
        // Coalesced: pairs cancel out, so at most a connect and a disconnect per keeper wait.
        #expect(slowStatus.queuedEvents > 0 && slowStatus.queuedEvents <= 2 * Self.keepers, "\(slowStatus)")
        let fastStatus = status.clients.first { $0.clientName == "fast" }
        #expect(fastStatus?.state == .live, "\(String(describing: fastStatus))")

        let log = daemon.log
        let mention = log.split(separator: "\n").first {
            $0.contains("session=\(slowSession)") && $0.contains("not read")
        }
        #expect(mention != nil, "accmond's log does not say that \(slowSession) stopped reading:\n\(log)")

        // The slow client reads again: it catches up, stays connected, and ends with the daemon's view.
        var lines: [String] = []
        let caughtUp = try await eventually(timeout: .seconds(10), interval: .milliseconds(5)) {
            lines += slow.takeAvailableLines()
            let now = try await driver.status().clients.first { $0.sessionID == slowSession }
            return now?.state == .live && now?.queuedEvents == 0 && now?.outboundBytes == 0
        }
        lines += slow.takeAvailableLines()  // the daemon wrote everything before reporting it live and empty
        #expect(caughtUp, "the slow client did not catch up within 10 s after it read again")
        #expect(!slow.sawEndOfFile, "the daemon closed the slow client's connection")

        var events: [AccessoryEvent] = []
        for line in lines {
            guard case .event(let event) = try codec.decodeServerMessage(Array(line.utf8)) else {
                Issue.record("slow client: not an event: \(line.prefix(120))")
                continue
            }
            events.append(event)
        }
        let outcome = SnapshotAtomicityTests.replay(slowSnapshot, events, filter: .all)
        #expect(outcome.problems.isEmpty, "slow client: \(outcome.problems.prefix(5))")
        let truth = try await driver.list()
        let converged = outcome.view == truth.accessories
        #expect(
            converged,
            "slow client's view \(SnapshotAtomicityTests.summary(outcome.view)) != \(SnapshotAtomicityTests.summary(truth.accessories))"
        )
        #expect(
            events.count < expectedEvents, "the slow client got all \(expectedEvents) events: nothing was coalesced")
        #expect(events.last.map { $0.sequence <= truth.sequence } ?? true)

        // Live again: a new event reaches it directly.
        let after = try await driver.simulateConnect(Accessory(kind: .usb, name: "after"))
        let next = try #require(await slow.readLine(), "the slow client got no live event after catching up")
        guard case .event(let live) = try codec.decodeServerMessage(Array(next.utf8)) else {
            Issue.record("slow client: not an event: \(next.prefix(120))")
            return
        }
        #expect(live.accessory.connectionID == after && live.sequence == truth.sequence + 1, "\(live)")
        bag.closeAll()
    }
}
