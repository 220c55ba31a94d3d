import AccmonClient
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

/// When the daemon writes what a loop turn produced: every session that got output in the turn is written to in the
/// same turn, in the order it got its output.
@Suite("Output of a loop turn", .timeLimit(.minutes(1)))
struct FlushOrderTests {
    static func simulateRequest(id: Int, serial: String) -> String {
        #"{"type":"simulate","id":\#(id),"action":"connect","accessory":{"kind":"usb","vendorID":"1209","#
            + #""productID":"0001","serialNumber":"\#(serial)","name":"flush order"}}"# + "\n"
    }

    /// A client's requests wait while its replies do not fit; once it reads, the waiting requests are handled while
    /// its replies are written. An event one of them publishes must reach the subscribers then, not at the next
    /// unrelated write.
    @Test func eventsOfARequestHandledFromABacklogAreWrittenAtOnce() async throws {
        let daemon = try await Accmond.start(arguments: ["--max-client-buffer", "4096"])
        let bag = ConnectionBag()
        defer { bag.closeAll() }
        // Large `list` replies: 20 accessories with 2 KB names.
        let driver = bag.add(try await daemon.connect("driver"))
        for index in 0..<20 {
            _ = try await driver.simulateConnect(
                Accessory(
                    kind: .usb, name: String(repeating: "n", count: 2_000), serialNumber: "K\(index)",
                    vendorID: "1209", productID: "0002"))
        }
        let subscriber = EventLog(try await bag.add(try await daemon.connect("subscriber")).subscribe())

        // 200 lists (about 8 MB of replies: far past the socket buffers and the 4 KiB bound), then a simulate.
        let requester = try RawSocket(path: daemon.socketPath)
        requester.setReceiveBufferSize(4096)
        try requester.send(#"{"type":"hello","id":1,"versions":[1],"client":"requester"}"# + "\n")
        _ = try #require(await requester.readObject(), "no hello reply")
        var requests = (0..<200).map { #"{"type":"list","id":\#($0 + 2)}"# + "\n" }.joined()
        requests += Self.simulateRequest(id: 1_000, serial: "FROM-BACKLOG")
        try requester.send(requests)
        // The simulate waits behind the lists: no event yet.
        try await Task.sleep(for: .milliseconds(300))
        #expect(subscriber.count == 0, "the simulate was handled before the requester read: no backlog to test")

        // The requester reads until the simulate's reply; the subscriber must then get the event promptly.
        var sawReply = false
        for _ in 0..<300 {
            guard let line = await requester.readLine() else { break }
            if jsonObject(line)?["id"] as? Int == 1_000 {
                sawReply = true
                break
            }
        }
        #expect(sawReply, "the requester got no reply to its simulate")
        #expect(
            await subscriber.waitForCount(1, timeout: .seconds(2)),
            "the event of a request handled from the backlog did not reach the subscriber")
        #expect(subscriber.events.first?.accessory.serialNumber == "FROM-BACKLOG")
    }

    /// Events are written before the reply to the request that caused them: when the requester has its reply,
    /// every subscriber can already read the event.
    @Test func subscribersHaveTheEventBeforeTheRequesterHasItsReply() async throws {
        let daemon = try await Accmond.start()
        var subscribers: [RawSocket] = []
        for index in 0..<100 {
            let socket = try RawSocket(path: daemon.socketPath)
            try socket.send(
                #"{"type":"hello","id":1,"versions":[1],"client":"s\#(index)"}"# + "\n"
                    + #"{"type":"subscribe","id":2}"#
                    + "\n")
            _ = try #require(await socket.readLine(), "subscriber \(index): no hello reply")
            _ = try #require(await socket.readLine(), "subscriber \(index): no snapshot")
            subscribers.append(socket)
        }
        let requester = try RawSocket(path: daemon.socketPath)
        try requester.send(#"{"type":"hello","id":1,"versions":[1],"client":"requester"}"# + "\n")
        _ = try #require(await requester.readObject(), "no hello reply")
        for round in 0..<10 {
            try requester.send(Self.simulateRequest(id: round + 2, serial: "ORDER\(round)"))
            #expect(requester.blockUntilReadable(milliseconds: 5_000), "round \(round): no reply")
            let waiting = subscribers.filter { $0.takeAvailableLines().count != 1 }
            #expect(
                waiting.count == 0, "round \(round): \(waiting.count) of 100 subscribers could not read the event yet")
            let reply = try #require(await requester.readObject(), "round \(round): no reply")
            #expect(reply["type"] as? String == "ok", "round \(round): \(reply)")
            // What arrived late is read before the next round.
            for subscriber in waiting { _ = await subscriber.readLine(timeout: .seconds(1)) }
        }
    }
}
