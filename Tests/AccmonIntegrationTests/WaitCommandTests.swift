import AccmonClient
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

/// `accmon wait` through the real binary against a real accmond: each exit status.
@Suite("accmon wait", .timeLimit(.minutes(1)))
struct WaitCommandTests {
    static let ftdi = Accessory(
        kind: .serial, name: "FT232R", serialNumber: "W1", vendorID: "0403", productID: "6001",
        deviceNodes: ["/dev/ttyUSB7", "/dev/serial/by-id/usb-FTDI-W1"])

    @Test func anAccessoryConnectedAlreadyIsFoundAtOnce() async throws {
        let daemon = try await Accmond.start()
        let plugger = try await daemon.connect("plugger")
        _ = try await plugger.simulateConnect(Accessory(kind: .usb, vendorID: "05ac", productID: "1234"))
        let id = try await plugger.simulateConnect(Self.ftdi)
        let result = try await daemon.accmon(["wait", "--kind", "serial", "--vendor", "0403", "--timeout", "5"])
        #expect(result.termination == .exited(0) && result.stdout == "/dev/ttyUSB7\n", "\(result)")

        let json = try await daemon.accmon(["wait", "--serial", "W1", "--json"])
        let object = try #require(jsonObject(json.stdout), "\(json)")
        #expect((object["version"] as? NSNumber)?.intValue == 1)
        let accessory = object["accessory"] as? [String: Any]
        #expect((accessory?["connectionID"] as? NSNumber)?.uint64Value == id.rawValue, "\(json)")

        // `list --connection` gives the one accessory, as a service started for a connection asks.
        let listed = try await daemon.accmon(["list", "--json", "--connection", id.description])
        let names = (jsonObject(listed.stdout)?["accessories"] as? [[String: Any]])?.map {
            $0["serialNumber"] as? String
        }
        #expect(names == ["W1"], "\(listed)")
    }

    @Test func anAccessoryThatConnectsLaterEndsTheWait() async throws {
        let daemon = try await Accmond.start()
        let waiting = try daemon.startAccmon(
            ["wait", "--vendor", "0403", "--serial", "W1", "--timeout", "20"], name: "wait")
        defer { waiting.kill() }
        let plugger = try await daemon.connect("plugger")
        // Not this one: another serial number.
        _ = try await plugger.simulateConnect(
            Accessory(kind: .serial, serialNumber: "other", vendorID: "0403", productID: "6001"))
        try await Task.sleep(for: .milliseconds(300))
        #expect(waiting.isRunning, "wait ended on a non-matching accessory: \(waiting.stdout)")
        _ = try await plugger.simulateConnect(Self.ftdi)
        let ended = await waiting.waitForExit(timeout: .seconds(10))
        #expect(
            ended == .exited(0) && waiting.stdout == "/dev/ttyUSB7\n", "\(String(describing: ended)) \(waiting.stdout)")
    }

    @Test func nothingMatchingWithinTheTimeoutExits75() async throws {
        let daemon = try await Accmond.start()
        let result = try await daemon.accmon(["wait", "--kind", "bluetooth-hid", "--timeout", "0.5"])
        #expect(result.termination == .exited(75), "\(result)")
        #expect(result.stdout.isEmpty && result.stderr.contains("within 0.5 s"), "\(result)")
    }

    @Test func anUnreachableDaemonExits69AndBadUsage64() async throws {
        let directory = try TemporaryDirectory()
        let unreachable = try await run(
            try Binaries.accmon, ["wait", "--socket", directory.file("none.sock"), "--timeout", "1"], in: directory)
        #expect(unreachable.termination == .exited(69), "\(unreachable)")
        for arguments in [["wait", "--timeout", "soon"], ["wait", "--bogus"], ["wait", "--kind"]] {
            let result = try await run(try Binaries.accmon, arguments, in: directory)
            #expect(result.termination == .exited(64), "\(arguments): \(result)")
            #expect(result.stderr.hasPrefix("Error: ") && result.stderr.contains("accmon wait --help"), "\(result)")
        }
    }
}
