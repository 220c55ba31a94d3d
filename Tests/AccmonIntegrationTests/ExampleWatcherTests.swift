import AccmonClient
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// Runs Examples/AccmonExampleWatcher against a real daemon.
@Suite("Example client", .timeLimit(.minutes(1)))
struct ExampleWatcherTests {
    /// The example watches serial accessories and says goodbye through disconnect handlers. Its `print` output is
    /// block-buffered into a file, so the test reads it after the example ends, which it does when accmond stops.
    @Test
    func exampleWatcherShowsSerialAccessoriesAndSaysGoodbye() async throws {
        let daemon = try await Accmond.start()
        let driver = try await daemon.connect("driver")
        defer { driver.close() }
        let presentID = try await driver.simulateConnect(
            Accessory(
                kind: .serial, name: "ExamplePresent", serialNumber: "EX1", vendorID: "0403", productID: "6001",
                deviceNodes: ["/dev/ttyUSB7"]))

        let example = try ChildProcess(
            try Binaries.url("AccmonExampleWatcher"), [daemon.socketPath], name: "example", directory: daemon.directory)
        // The example subscribes after it connects: wait until the daemon lists a subscribed client (the driver is not).
        // A debug build's first start can take seconds on a loaded machine.
        let subscribed = try await eventually(timeout: .seconds(30)) {
            try await driver.status().clients.contains { $0.subscribed }
        }
        try #require(subscribed, "the example never subscribed: \(example.stderr) \(example.stdout)")

        let pluggedID = try await driver.simulateConnect(Accessory(kind: .serial, name: "ExamplePlugged"))
        let ignoredID = try await driver.simulateConnect(Accessory(kind: .usb, name: "ExampleIgnored"))
        try await driver.simulateDisconnect(pluggedID)
        try await driver.simulateDisconnect(ignoredID)
        try await driver.simulateDisconnect(presentID)
        let finalSequence = try await driver.status().sequence
        #expect(example.isRunning, "the example exited early: \(example.stdout) \(example.stderr)")

        daemon.process.send(SIGTERM)
        #expect(await daemon.process.waitForExit(timeout: .seconds(5)) == .exited(0))
        let termination = await example.waitForExit(timeout: .seconds(5))
        #expect(
            termination == .exited(0),
            "the example after accmond stopped: \(termination.map(\.description) ?? "running")")
        let lines = example.stdout.split(separator: "\n").map(String.init)
        let context = "example output: \(lines)"
        #expect(
            lines.first?.hasPrefix("connected to accmond \(AccmonVersion.current) as session s-") == true, "\(context)")
        #expect(lines.contains("present: ExamplePresent at /dev/ttyUSB7"), "\(context)")
        #expect(lines.contains("connect: ExamplePlugged [seq 2]"), "\(context)")
        for (name, id) in [("ExamplePlugged", pluggedID), ("ExamplePresent", presentID)] {
            let goodbye = lines.firstIndex(of: "goodbye, \(name) (connection \(id))")
            let disconnect = lines.firstIndex { $0.hasPrefix("disconnect: \(name) [seq ") }
            #expect(goodbye != nil && disconnect != nil, "\(name): \(context)")
            if let goodbye, let disconnect {
                #expect(goodbye < disconnect, "the goodbye handler ran after the event reached the app: \(context)")
            }
            #expect(lines.filter { $0.hasPrefix("goodbye, \(name)") }.count == 1, "\(context)")
        }
        #expect(lines.contains("disconnect: ExamplePresent [seq \(finalSequence)]"), "\(context)")
        #expect(
            !lines.contains { $0.contains("ExampleIgnored") },
            "the serial filter let a USB accessory through: \(context)")
        #expect(lines.last?.contains("accmond stopped") == true, "\(context)")
    }
}
