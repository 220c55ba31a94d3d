import AccmonClient
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Testing

@Suite("Stopping accmond with clients attached", .timeLimit(.minutes(1)))
struct ShutdownTests {
    @Test(arguments: [SIGTERM, SIGINT])
    func signalStopsDaemonCleanlyAndTellsEveryClient(signal: Int32) async throws {
        let name = signal == SIGTERM ? "SIGTERM" : "SIGINT"
        let daemon = try await Accmond.start()
        let bag = ConnectionBag()
        var logs: [EventLog] = []
        for index in 0..<5 {
            let connection = bag.add(try await daemon.connect("shutdown-\(index)"))
            logs.append(EventLog(try await connection.subscribe()))
        }
        let watch = try daemon.startAccmon(["watch", "--json"], name: "watch")
        let watching = await eventually { watch.stdout.contains("\"type\":\"snapshot\"") }
        try #require(watching, "accmon watch printed no snapshot: stdout \(watch.stdout), stderr \(watch.stderr)")

        // One event reaches everyone first, so every client is live when the signal comes.
        let driver = bag.add(try await daemon.connect("driver"))
        _ = try await driver.simulateConnect(Accessory(kind: .usb, name: "before \(name)"))
        for log in logs { #expect(await log.waitForCount(1)) }
        #expect(await eventually { watch.stdout.split(separator: "\n").count >= 2 }, "watch: \(watch.stdout)")

        daemon.process.send(signal)
        let termination = await daemon.process.waitForExit(timeout: .seconds(5))
        #expect(
            termination == .exited(0), "accmond after \(name): \(termination.map(\.description) ?? "still running")")
        #expect(!daemon.socketFileExists, "accmond left its socket file \(daemon.socketPath) behind")
        #expect(daemon.log.contains("received \(name)"), "log: \(daemon.log)")

        for (index, log) in logs.enumerated() {
            #expect(await log.waitForEnd(timeout: .seconds(5)), "client \(index)'s event sequence did not end")
            let error = log.error as? AccmonError
            #expect(error?.code == .daemonStopped, "client \(index) ended with \(String(describing: log.error))")
        }
        // Requests on a connection to a stopped daemon fail too, without hanging.
        await #expect(throws: AccmonError.self) { try await driver.status() }

        let watchTermination = await watch.waitForExit(timeout: .seconds(5))
        #expect(watchTermination == .exited(69), "accmon watch: \(watchTermination.map(\.description) ?? "running")")
        #expect(!watch.stderr.isEmpty, "accmon watch printed no error")
        #expect(watch.stderr.contains("stopped"), "accmon watch stderr: \(watch.stderr)")
        bag.closeAll()
    }
}
