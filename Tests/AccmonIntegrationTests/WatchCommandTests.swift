import AccmonClient
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

@Suite("accmon watch --json", .timeLimit(.minutes(1)))
struct WatchCommandTests {
    struct Plug {
        var arguments: [String]
        var kind: String
        var vendorID: String
        var productID: String
        var name: String
        var serialNumber: String
        var deviceNodes: [String]
        var protocolStrings: [String]
    }

    static let plugs = [
        Plug(
            arguments: [
                "--kind", "serial", "--vendor", "0403", "--product", "6001", "--name", "FT232R USB UART",
                "--serial", "A10K1ABC", "--node", "/dev/ttyUSB0", "--manufacturer", "FTDI",
            ],
            kind: "serial", vendorID: "0403", productID: "6001", name: "FT232R USB UART", serialNumber: "A10K1ABC",
            deviceNodes: ["/dev/ttyUSB0"], protocolStrings: []),
        Plug(
            arguments: ["--kind", "usb", "--vendor", "1A86", "--product", "7523", "--protocol", "com.acme.gps"],
            kind: "usb", vendorID: "1a86", productID: "7523", name: "", serialNumber: "", deviceNodes: [],
            protocolStrings: ["com.acme.gps"]),
        Plug(
            arguments: ["--kind=bluetooth-hid", "--name", "Keyboard K380", "--serial", "bt:01"],
            kind: "bluetooth-hid", vendorID: "", productID: "", name: "Keyboard K380", serialNumber: "bt:01",
            deviceNodes: [], protocolStrings: []),
    ]

    @Test func watchJSONPrintsSnapshotThenEachEventOfTheCLIsSimulatedPlugs() async throws {
        let daemon = try await Accmond.start()
        // One accessory present before watch starts, to see it in the snapshot.
        let before = try await daemon.accmon(["simulate", "connect", "--kind", "usb", "--name", "present"])
        #expect(before.termination == .exited(0), "\(before)")
        #expect(before.stdout == "1\n", "\(before)")

        let watch = try daemon.startAccmon(["watch", "--json"], name: "watch")
        try #require(await eventually { watch.stdout.contains("\n") }, "watch printed nothing: \(watch.stderr)")

        var connectionIDs: [UInt64] = []
        for plug in Self.plugs {
            let result = try await daemon.accmon(["simulate", "connect"] + plug.arguments)
            #expect(result.termination == .exited(0), "\(result)")
            #expect(result.stderr.isEmpty, "\(result)")
            let id = try #require(
                UInt64(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)),
                "simulate connect did not print a connection id: \(result)")
            connectionIDs.append(id)
        }
        #expect(connectionIDs == [2, 3, 4])
        for id in [connectionIDs[1], connectionIDs[0]] {
            let result = try await daemon.accmon(["simulate", "disconnect", String(id)])
            #expect(result.termination == .exited(0), "\(result)")
            #expect(result.stdout.isEmpty && result.stderr.isEmpty, "\(result)")
        }
        // Disconnecting a connection that is gone fails (exit 1) and says why.
        let again = try await daemon.accmon(["simulate", "disconnect", String(connectionIDs[0])])
        #expect(again.termination == .exited(1), "\(again)")
        #expect(again.stderr.contains("no-such-connection"), "\(again)")

        let expectedLines = 1 + Self.plugs.count + 2
        let arrived = await eventually { watch.stdout.split(separator: "\n").count >= expectedLines }
        #expect(arrived, "watch printed: \(watch.stdout)")
        let lines = watch.stdout.split(separator: "\n").map(String.init)
        let objects = lines.compactMap(jsonObject)
        try #require(objects.count == lines.count, "watch printed a line that is not a JSON object: \(lines)")
        try #require(objects.count == expectedLines, "watch printed \(objects.count) lines: \(lines)")

        let snapshot = objects[0]
        #expect(snapshot["type"] as? String == "snapshot")
        #expect((snapshot["seq"] as? NSNumber)?.intValue == 1)
        let present = snapshot["accessories"] as? [[String: Any]] ?? []
        #expect(present.count == 1 && present.first?["name"] as? String == "present", "\(snapshot)")

        for (index, plug) in Self.plugs.enumerated() {
            let event = objects[1 + index]
            #expect(event["type"] as? String == "connect", "\(event)")
            #expect((event["seq"] as? NSNumber)?.intValue == 2 + index, "\(event)")
            let accessory = try #require(event["accessory"] as? [String: Any], "\(event)")
            #expect((accessory["connectionID"] as? NSNumber)?.uint64Value == connectionIDs[index])
            #expect(accessory["kind"] as? String == plug.kind)
            #expect(accessory["vendorID"] as? String == plug.vendorID)
            #expect(accessory["productID"] as? String == plug.productID)
            #expect(accessory["name"] as? String == plug.name)
            #expect(accessory["serialNumber"] as? String == plug.serialNumber)
            #expect(accessory["deviceNodes"] as? [String] == plug.deviceNodes)
            #expect(accessory["protocolStrings"] as? [String] == plug.protocolStrings)
            #expect((accessory["accessoryID"] as? String)?.hasPrefix(plug.kind + ":") == true, "\(accessory)")
        }
        for (offset, id) in [connectionIDs[1], connectionIDs[0]].enumerated() {
            let event = objects[1 + Self.plugs.count + offset]
            #expect(event["type"] as? String == "disconnect", "\(event)")
            #expect((event["seq"] as? NSNumber)?.intValue == 2 + Self.plugs.count + offset, "\(event)")
            let accessory = event["accessory"] as? [String: Any]
            #expect((accessory?["connectionID"] as? NSNumber)?.uint64Value == id, "\(event)")
        }
        // Every line is byte for byte what ProtocolCodec encodes for its message: watch prints the daemon's event lines
        // as received, and they must not differ from what it printed when it re-encoded each event.
        let codec = ProtocolCodec()
        for line in lines {
            let message = try codec.decodeServerMessage(Array(line.utf8))
            #expect(codec.encode(message) == Array((line + "\n").utf8), "\(line.prefix(200))")
        }
        // Keys are sorted, as --json promises.
        for line in lines {
            let keys = (jsonObject(line) ?? [:]).keys.sorted()
            let positions = keys.compactMap { line.range(of: "\"\($0)\":")?.lowerBound }
            #expect(positions == positions.sorted(), "keys not sorted: \(line.prefix(200))")
        }

        watch.send(SIGINT)
        let termination = await watch.waitForExit(timeout: .seconds(5))
        #expect(termination == .exited(0), "accmon watch after SIGINT: \(termination.map(\.description) ?? "running")")
        #expect(watch.stderr.isEmpty, "watch stderr: \(watch.stderr)")
    }

    /// A burst arrives in few reads of many lines each, which watch writes at once: every event is printed, whole and
    /// in order, with --json and without.
    @Test(arguments: [true, false])
    func watchPrintsEveryEventOfABurstWholeAndInOrder(json: Bool) async throws {
        let daemon = try await Accmond.start()
        let watch = try daemon.startAccmon(["watch"] + (json ? ["--json"] : []), name: "watch")
        let driver = try await daemon.connect("driver")
        defer { driver.close() }
        // Without --json an empty snapshot prints nothing: wait until watch is subscribed.
        try #require(await eventually { (try? await driver.status())?.clients.contains { $0.subscribed } == true })
        let count = 500
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                group.addTask { _ = try await driver.simulateConnect(Accessory(kind: .usb, name: "burst \(index)")) }
            }
            try await group.waitForAll()
        }
        let expected = count + (json ? 1 : 0)
        #expect(await eventually { watch.stdout.split(separator: "\n").count >= expected }, "\(watch.stderr)")
        let lines = watch.stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == expected && watch.stdout.hasSuffix("\n"))
        let connectionIDs: [UInt64]
        if json {
            let events = lines.dropFirst().map { line in jsonObject(line) }
            #expect(events.allSatisfy { $0?["type"] as? String == "connect" }, "a line is not a connect event")
            connectionIDs = events.compactMap {
                (($0?["accessory"] as? [String: Any])?["connectionID"] as? NSNumber)?.uint64Value
            }
        } else {
            connectionIDs = lines.compactMap { line in
                line.split(separator: " ").first { $0.hasPrefix("conn=") }.flatMap { UInt64($0.dropFirst(5)) }
            }
        }
        #expect(connectionIDs == Array(1...UInt64(count)), "watch printed the events out of order or not all of them")
        watch.send(SIGINT)
        #expect(await watch.waitForExit(timeout: .seconds(5)) == .exited(0))
    }
}
