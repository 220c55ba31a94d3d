import AccmonClient
import AccmonDevices
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

/// One coldplugged device: added to the testbed before accmond starts, without uevents.
struct Device {
    var template: String
    var name: String
    var params: [String: Any] = [:]
}

/// A harness with accmond in it and two clients watching everything: the `accmon watch --json` CLI and the
/// AccmonClient library. Every assertion about events is made on what BOTH received (they must agree exactly).
///
/// Events are consumed in order through a cursor: ``next(_:timeout:)`` returns the next events after checking that
/// the two clients saw the same ones; ``expectQuiet(_:)`` proves that nothing else happened by plugging a marker
/// device and seeing its connect (and disconnect) come next.
final class UdevScenario: @unchecked Sendable {
    let harness: UdevHarness
    let cli: CLIWatcher
    let library: LibraryWatcher
    private(set) var cursor = 0
    private var barriers = 0

    /// Launches the harness, adds `coldplug` devices, starts accmond, and subscribes both clients.
    static func begin(
        coldplug: [Device] = [], accmondArguments: [String] = ["--log-level", "debug"]
    ) async throws
        -> UdevScenario
    {
        let harness = try UdevHarness(accmondArguments: accmondArguments, deferStart: true)
        for device in coldplug {
            try await harness.add(device.template, device.name, params: device.params, events: false)
        }
        try await harness.start()
        let cli = try CLIWatcher(socketPath: harness.socketPath, directory: harness.directory)
        let library = try await LibraryWatcher(socketPath: harness.socketPath)
        let scenario = UdevScenario(harness: harness, cli: cli, library: library)
        guard await eventually(timeout: .seconds(10), { cli.snapshot != nil }) else {
            throw UdevTestError(
                description: "accmon watch --json printed no snapshot: \(cli.problems)\n"
                    + harness.diagnostics())
        }
        return scenario
    }

    private init(harness: UdevHarness, cli: CLIWatcher, library: LibraryWatcher) {
        self.harness = harness
        self.cli = cli
        self.library = library
    }

    var observers: [any Observer] { [cli, library] }

    /// The snapshot both clients got; they must agree (nothing happened between the two subscriptions).
    func snapshot(sourceLocation: SourceLocation = #_sourceLocation) throws -> Snapshot {
        let fromLibrary = try #require(library.snapshot, sourceLocation: sourceLocation)
        let fromCLI = try #require(cli.snapshot, "\(cli.problems)", sourceLocation: sourceLocation)
        #expect(
            fromCLI == fromLibrary,
            "the CLI's and the library's snapshots differ\nCLI:\n\(fromCLI)\nlibrary:\n\(fromLibrary)",
            sourceLocation: sourceLocation)
        return fromLibrary
    }

    /// The next `count` events, once both clients have them; they must be the same in both.
    func next(
        _ count: Int, timeout: Duration = .seconds(15), sourceLocation: SourceLocation = #_sourceLocation
    )
        async throws -> [AccessoryEvent]
    {
        let target = cursor + count
        let arrived = await eventually(timeout: timeout) {
            cli.events.count >= target && library.events.count >= target
        }
        guard arrived else {
            throw UdevTestError(
                description: "expected \(count) more event(s) after the first \(cursor) within "
                    + "\(timeout)\n" + report(from: cursor))
        }
        let fromCLI = Array(cli.events[cursor..<target])
        let fromLibrary = Array(library.events[cursor..<target])
        #expect(
            fromCLI == fromLibrary,
            "the CLI and the library received different events\nCLI:\n\(describe(fromCLI))\nlibrary:\n\(describe(fromLibrary))",
            sourceLocation: sourceLocation)
        cursor = target
        return fromLibrary
    }

    /// Proves that no event came since the last one consumed: plugs a marker USB device and checks that the next
    /// event is its connect, then unplugs it and checks that the one after is its disconnect.
    func expectQuiet(_ what: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        barriers += 1
        let name = "barrier\(barriers)"
        let serial = "BARRIER\(barriers)"
        try await harness.add(
            "usb", name, params: ["vendor": "1209", "product": "b42e", "name": "accmon barrier", "serial": serial])
        let connect = try await next(1, sourceLocation: sourceLocation)
        #expect(
            connect.first?.change == .connect && connect.first?.accessory.serialNumber == serial,
            "after \(what): expected no event, but got:\n\(describe(connect))\n\(harness.diagnostics())",
            sourceLocation: sourceLocation)
        try await harness.remove(name)
        let disconnect = try await next(1, sourceLocation: sourceLocation)
        #expect(
            disconnect.first?.change == .disconnect && disconnect.first?.accessory.serialNumber == serial,
            "after \(what): expected only the barrier's disconnect, got:\n\(describe(disconnect))",
            sourceLocation: sourceLocation)
    }

    /// The accessories connected now, from a fresh `list` by the library.
    func list() async throws -> [Accessory] {
        try await library.connection.list().accessories
    }

    /// What both clients saw from event `start` on, and the logs: for failure messages.
    func report(from start: Int = 0) -> String {
        var text = ""
        for observer in observers {
            let events = observer.events
            text +=
                "--- \(observer.name): \(events.count) events; from #\(start):\n"
                + describe(events.dropFirst(start).prefix(40)) + "\n"
            let problems = observer.problems
            if !problems.isEmpty { text += "    problems: \(problems)\n" }
        }
        return text + harness.diagnostics()
    }

    /// Stops the clients, accmond and the harness; accmond must exit 0.
    func finish(sourceLocation: SourceLocation = #_sourceLocation) async throws {
        library.stop()
        cli.stop()
        let exit = try await harness.quit()
        #expect(
            exit == 0, "accmond exit: \(String(describing: exit))\n\(harness.diagnostics())",
            sourceLocation: sourceLocation)
    }
}
