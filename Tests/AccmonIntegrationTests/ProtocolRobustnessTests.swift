import AccmonClient
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

@Suite("Protocol robustness over a raw socket", .timeLimit(.minutes(1)))
struct ProtocolRobustnessTests {
    struct BadLine: CustomStringConvertible, Sendable {
        var label: String
        var bytes: [UInt8]
        var code: String
        /// The id the error should echo, when the line had a readable one.
        var id: Int?

        var description: String { label }
    }

    static let badLines: [BadLine] = [
        BadLine(label: "malformed JSON", bytes: Array(#"{"type":"status","#.utf8), code: "malformed-json"),
        BadLine(label: "not UTF-8", bytes: [0x7B, 0xFF, 0xFE, 0x7D], code: "malformed-json"),
        BadLine(label: "not an object", bytes: Array("[1,2,3]".utf8), code: "invalid-message"),
        BadLine(label: "no type", bytes: Array(#"{"id":7}"#.utf8), code: "invalid-message", id: 7),
        BadLine(label: "unknown type", bytes: Array(#"{"type":"explode","id":3}"#.utf8), code: "unknown-type", id: 3),
        BadLine(
            label: "missing field", bytes: Array(#"{"type":"simulate","id":4,"action":"connect"}"#.utf8),
            code: "missing-field", id: 4),
        BadLine(
            label: "missing versions", bytes: Array(#"{"type":"hello","id":5}"#.utf8), code: "missing-field", id: 5),
        BadLine(
            label: "invalid filter", bytes: Array(#"{"type":"list","id":6,"filter":{"vendorID":"xyz"}}"#.utf8),
            code: "invalid-field", id: 6),
        BadLine(
            label: "wrong field type", bytes: Array(#"{"type":"hello","id":8,"versions":"1"}"#.utf8),
            code: "invalid-field", id: 8),
        BadLine(
            label: "unknown kind",
            bytes: Array(#"{"type":"simulate","id":9,"action":"connect","accessory":{"kind":"toaster"}}"#.utf8),
            code: "invalid-field", id: 9),
        // A key twice (JSONDecoder alone kept the first) and integers written otherwise (1e-999999 was read as 0).
        BadLine(
            label: "duplicate key", bytes: Array(#"{"type":"status","id":10,"type":"reload"}"#.utf8),
            code: "invalid-field", id: 10),
        BadLine(
            label: "id with an exponent", bytes: Array(#"{"type":"status","id":1e-999999}"#.utf8), code: "invalid-field"
        ),
        BadLine(
            label: "seq with a fraction", bytes: Array(#"{"type":"ack","id":11,"seq":1.0}"#.utf8),
            code: "invalid-field",
            id: 11),
        BadLine(
            label: "over-long line",
            bytes: Array(#"{"type":"status","pad":""#.utf8) + Array(repeating: 0x61, count: 70_000)
                + Array(#""}"#.utf8), code: "line-too-long"),
    ]

    @Test(arguments: badLines)
    func badLineGetsAnErrorAndTheConnectionStillWorks(line: BadLine) async throws {
        let daemon = try await Accmond.start()
        let socket = try RawSocket(path: daemon.socketPath)
        try socket.send(bytes: line.bytes + [0x0A])
        let error = try #require(await socket.readObject(), "\(line): no reply")
        #expect(error["type"] as? String == "error", "\(line): \(error)")
        #expect(error["code"] as? String == line.code, "\(line): \(error)")
        #expect(!((error["message"] as? String) ?? "").isEmpty, "\(line): \(error)")
        #expect((error["id"] as? NSNumber)?.intValue == line.id, "\(line): \(error)")

        try socket.send(#"{"type":"status","id":"after"}"# + "\n")
        let status = try #require(await socket.readObject(), "\(line): no reply to status after the bad line")
        #expect(status["type"] as? String == "status", "\(line): \(status)")
        #expect(status["id"] as? String == "after", "\(line): \(status)")
        #expect(daemon.process.isRunning)
    }

    @Test func overLongLineSentInPiecesIsSkippedToItsNewline() async throws {
        let daemon = try await Accmond.start()
        let socket = try RawSocket(path: daemon.socketPath)
        // 3 × 30000 bytes without a newline, then the newline and a good request in the same write.
        for _ in 0..<3 { try socket.send(String(repeating: "x", count: 30_000)) }
        try socket.send("tail\n" + #"{"type":"status","id":1}"# + "\n")
        let error = try #require(await socket.readObject())
        #expect(error["code"] as? String == "line-too-long", "\(error)")
        let status = try #require(await socket.readObject())
        #expect(status["type"] as? String == "status" && (status["id"] as? NSNumber)?.intValue == 1, "\(status)")
        // A line of exactly the limit is not too long: it is read, and is malformed JSON.
        try socket.send(String(repeating: "y", count: WireFormat.maximumLineLength) + "\n")
        let exact = try #require(await socket.readObject())
        #expect(exact["code"] as? String == "malformed-json", "\(exact)")
    }

    /// Requests written in pieces that end anywhere (in a line, between lines, several lines at once), with blank
    /// lines and malformed ones among them: the daemon joins each line's pieces and answers every request once, in
    /// order, whether it handles a line where it read it or after the framer joined it.
    @Test func requestsWrittenInRandomPiecesAreEachAnsweredOnceInOrder() async throws {
        let daemon = try await Accmond.start()
        let socket = try RawSocket(path: daemon.socketPath)
        var random = SplitMix64(seed: 0x5EED_18)
        var stream: [UInt8] = []
        var expected: [String] = []  // "status ID" or "error malformed-json"
        for id in 0..<120 {
            switch random.next(below: 10) {
            case 0: stream += Array("  \t\n".utf8)  // a keep-alive: no reply
            case 1:
                stream += Array(#"{"type":"status","#.utf8) + [0x0A]
                expected.append("error malformed-json")
            default:
                stream += Array(#"{"type":"status","id":\#(id)}"#.utf8) + [0x0A]
                expected.append("status \(id)")
            }
        }
        var start = 0
        while start < stream.count {
            let end = min(stream.count, start + 1 + Int(random.next(below: 90)))
            try socket.send(bytes: Array(stream[start..<end]))
            start = end
            // Now and then a pause, so that a read of the daemon's ends where this piece does.
            if random.next(below: 3) == 0 { try await Task.sleep(for: .milliseconds(2)) }
        }
        var answered: [String] = []
        for _ in expected {
            guard let reply = await socket.readObject() else { break }
            if reply["type"] as? String == "status" {
                answered.append("status \((reply["id"] as? NSNumber)?.intValue ?? -1)")
            } else {
                answered.append("\(reply["type"] as? String ?? "?") \(reply["code"] as? String ?? "?")")
            }
        }
        #expect(answered == expected)
        #expect(!(await socket.hasPendingData(within: .milliseconds(200))), "a reply more than the requests")
    }

    @Test func helloWithOnlyUnknownVersionsGetsUnsupportedVersion() async throws {
        let daemon = try await Accmond.start()
        let socket = try RawSocket(path: daemon.socketPath)
        try socket.send(#"{"type":"hello","id":1,"versions":[99]}"# + "\n")
        let refused = try #require(await socket.readObject())
        #expect(refused["type"] as? String == "error", "\(refused)")
        #expect(refused["code"] as? String == "unsupported-version", "\(refused)")
        #expect((refused["id"] as? NSNumber)?.intValue == 1, "\(refused)")
        // The connection stays usable: a hello with a version spoken here then succeeds, and only once.
        try socket.send(#"{"type":"hello","id":2,"versions":[99,1]}"# + "\n")
        let hello = try #require(await socket.readObject())
        #expect(hello["type"] as? String == "hello" && (hello["version"] as? NSNumber)?.intValue == 1, "\(hello)")
        try socket.send(#"{"type":"hello","id":3,"versions":[1]}"# + "\n")
        let twice = try #require(await socket.readObject())
        #expect(twice["code"] as? String == "already-greeted", "\(twice)")
    }

    @Test func nothingIsSentBeforeSubscribeEvenWhileAccessoriesPlug() async throws {
        let daemon = try await Accmond.start()
        let socket = try RawSocket(path: daemon.socketPath)
        try socket.send(#"{"type":"hello","id":1,"versions":[1],"client":"quiet"}"# + "\n")
        let hello = try #require(await socket.readObject())
        #expect(hello["type"] as? String == "hello", "\(hello)")

        let driver = try await daemon.connect("driver")
        defer { driver.close() }
        var plugged: [ConnectionID] = []
        for index in 0..<10 {
            plugged.append(try await driver.simulateConnect(Accessory(kind: .usb, name: "q\(index)")))
        }
        try await driver.simulateDisconnect(plugged[0])
        #expect(await !socket.hasPendingData(within: .milliseconds(200)), "the daemon sent something unasked")

        // The daemon handles one connection's lines in order: had it queued events for us, they would come first.
        try socket.send(#"{"type":"status","id":2}"# + "\n")
        let status = try #require(await socket.readObject())
        #expect(status["type"] as? String == "status", "an unsubscribed client received \(status)")
        #expect((status["sequence"] as? NSNumber)?.intValue == 11, "\(status)")

        // After subscribing: the snapshot holds the 9 still connected, then live events flow.
        try socket.send(#"{"type":"subscribe","id":3}"# + "\n")
        let snapshot = try #require(await socket.readObject())
        #expect(snapshot["type"] as? String == "snapshot", "\(snapshot)")
        #expect((snapshot["accessories"] as? [Any])?.count == 9, "\(snapshot)")
        _ = try await driver.simulateConnect(Accessory(kind: .serial, name: "after"))
        let event = try #require(await socket.readObject())
        #expect(event["type"] as? String == "connect" && (event["seq"] as? NSNumber)?.intValue == 12, "\(event)")

        // After unsubscribing, silence again.
        try socket.send(#"{"type":"unsubscribe","id":4}"# + "\n")
        let ok = try #require(await socket.readObject())
        #expect(ok["type"] as? String == "ok" && (ok["id"] as? NSNumber)?.intValue == 4, "\(ok)")
        _ = try await driver.simulateConnect(Accessory(kind: .serial, name: "unsubscribed"))
        try socket.send(#"{"type":"status","id":5}"# + "\n")
        let last = try #require(await socket.readObject())
        #expect(last["type"] as? String == "status", "an unsubscribed client received \(last)")
    }
}
