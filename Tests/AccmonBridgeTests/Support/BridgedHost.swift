import AccmonClient
import AccmonProtocol
import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc

/// One host of a test fleet: a real `accmond --simulate --no-udev` on its own socket and state directory, and a real
/// `accmon-mqtt` publishing it under `name`; both killed in `deinit`.
final class BridgedHost: @unchecked Sendable {
    let name: String
    let directory: TemporaryDirectory
    let socketPath: String
    let configPath: String
    private(set) var daemon: ChildProcess
    private(set) var bridge: ChildProcess?
    private var bridgeRuns = 0
    private var daemonRuns = 0

    /// Starts accmond, writes the bridge's configuration (`broker`, `host`, `socket`, a machine id, a short
    /// keep-alive, then `settings`: more keys as raw JSON values) and starts the bridge unless `startBridge` is false.
    static func start(
        name: String, broker: String, machineID: String? = nil, settings: [String: String] = [:],
        startBridge: Bool = true,
        manifest: String = #"{"version": 1, "accessories": [{"name": "everything", "match": {"id": "*:*"}}]}"#
    ) async throws -> BridgedHost {
        let directory = try TemporaryDirectory()
        let machineIDFile = directory.file("machine-id")
        try ((machineID ?? "m\(UInt64.random(in: 0...UInt64.max))") + "\n").write(
            toFile: machineIDFile, atomically: true, encoding: .utf8)
        var keys: [String: String] = [
            "broker": json(broker), "host": json(name), "socket": json(directory.file("accmond.sock")),
            "machineIDFile": json(machineIDFile), "keepAlive": "5", "stateDirectory": json(directory.file("bridge-state")),
        ]
        keys.merge(settings) { _, new in new }
        let config = "{\n" + keys.keys.sorted().map { "  \(json($0)): \(keys[$0]!)" }.joined(separator: ",\n") + "\n}\n"
        let configPath = directory.file("mqtt.json")
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        try manifest.write(toFile: directory.file("manifest.json"), atomically: true, encoding: .utf8)
        let daemon = try await launchDaemon(directory: directory, run: 0)
        let host = BridgedHost(name: name, directory: directory, configPath: configPath, daemon: daemon)
        if startBridge { try host.startBridge() }
        return host
    }

    /// Starts a host whose bridge logs in to `broker` as the host (when the broker asks for a login).
    static func start(
        name: String, on broker: any TestBroker, machineID: String? = nil, settings: [String: String] = [:],
        startBridge: Bool = true
    ) async throws -> BridgedHost {
        try await start(
            name: name, broker: broker.url, machineID: machineID,
            settings: try broker.bridgeSettings(host: name).merging(settings) { _, new in new },
            startBridge: startBridge)
    }

    private init(name: String, directory: TemporaryDirectory, configPath: String, daemon: ChildProcess) {
        self.name = name
        self.directory = directory
        self.socketPath = directory.file("accmond.sock")
        self.configPath = configPath
        self.daemon = daemon
    }

    private static func launchDaemon(directory: TemporaryDirectory, run: Int) async throws -> ChildProcess {
        let socket = directory.file("accmond.sock")
        let process = try ChildProcess(
            try Binaries.accmond,
            [
                "--socket", socket, "--state-dir", directory.file("state"), "--no-udev", "--simulate",
                "--manifest", directory.file("manifest.json"), "--manifest-dir", directory.file("manifest.d"),
                "--log-level", "debug",
            ], name: "accmond-\(run)", directory: directory)
        let accepting = await eventually(timeout: .seconds(10), interval: .milliseconds(5)) {
            guard process.isRunning else { return true }
            guard let probe = try? UnixSocket.connect(path: socket) else { return false }  // try?: not yet listening
            probe.close()
            return true
        }
        guard accepting, process.isRunning else {
            throw Binaries.LocateError(description: "accmond did not start: \(process.stderr)")
        }
        return process
    }

    /// Starts a new run of the bridge.
    func startBridge(logLevel: String = "debug") throws {
        bridgeRuns += 1
        bridge = try ChildProcess(
            try Binaries.url("accmon-mqtt"), ["--config", configPath, "--log-level", logLevel],
            name: "bridge-\(bridgeRuns)", directory: directory)
    }

    /// Kills the bridge with SIGKILL: no goodbye to accmond or the broker.
    func killBridge() { bridge?.kill() }

    /// Stops the bridge with SIGTERM and waits for it to exit.
    func stopBridge() async -> Termination? {
        bridge?.send(SIGTERM)
        return await bridge?.waitForExit(timeout: .seconds(10))
    }

    /// Stops accmond (with `signal`) and starts it again on the same socket and state directory.
    func restartDaemon(signal: Int32) async throws {
        daemon.send(signal)
        _ = await daemon.waitForExit(timeout: .seconds(10))
        daemon.kill()
        daemonRuns += 1
        daemon = try await Self.launchDaemon(directory: directory, run: daemonRuns)
    }

    /// The current bridge run's log.
    var bridgeLog: String { bridge?.stderr ?? "" }

    /// The last `count` lines of every bridge run's log, named after the host: what a failure message shows.
    func logTail(_ count: Int = 30) -> String {
        "--- \(name):\n" + allBridgeLogs.split(separator: "\n").suffix(count).joined(separator: "\n")
            + "\n--- \(name)'s accmond:\n" + daemon.stderr.split(separator: "\n").suffix(count).joined(separator: "\n")
    }

    /// Every bridge run's log, in order.
    var allBridgeLogs: String {
        (1...max(bridgeRuns, 1)).map {
            (try? String(contentsOfFile: directory.file("bridge-\($0).err"), encoding: .utf8)) ?? ""
        }  // try?: a run that wrote nothing
        .joined(separator: "\n")
    }

    /// A library connection to this host's accmond.
    func connect(_ clientName: String = "bridge-test") async throws -> AccmonConnection {
        try await AccmonConnection.connect(socketPath: socketPath, clientName: clientName)
    }

    /// Plugs and unplugs at random on a connection of its own: `rounds` storms of `steps` (see ``Plugger``) with
    /// `pause` between them; returns how many accessories were plugged.
    @discardableResult
    func storm(seed: UInt64, rounds: Int = 1, steps: Int, target: Int, pause: Duration = .zero) async throws -> Int {
        let connection = try await connect()
        defer { connection.close() }
        var random = SplitMix64(seed: seed)
        var plugger = Plugger(connection)
        for _ in 0..<rounds {
            try await plugger.storm(steps: steps, target: target, using: &random)
            try await Task.sleep(for: pause)
        }
        return plugger.plugged
    }

    /// What accmond says is connected, by connection id.
    func truth() async throws -> [UInt64: Accessory] {
        let connection = try await connect("truth")
        defer { connection.close() }
        let snapshot = try await connection.list()
        return Dictionary(uniqueKeysWithValues: snapshot.accessories.map { ($0.connectionID.rawValue, $0) })
    }

    /// Runs the `accmon` CLI (against this host's accmond when it needs a daemon).
    func accmon(_ arguments: [String]) async throws -> CommandResult {
        try await run(try Binaries.accmon, ["--socket", socketPath] + arguments, in: directory)
    }

    deinit {
        bridge?.kill()
        daemon.kill()
    }
}

/// `text` as a JSON string.
func json(_ text: String) -> String {
    String(decoding: try! JSONEncoder().encode(text), as: UTF8.self)  // a string always encodes
}

/// Plugs and unplugs simulated accessories on one host at random; some share an accessory id, some have ids with the
/// characters topics cannot carry as they are.
struct Plugger {
    let connection: AccmonConnection
    var live: [ConnectionID] = []
    var plugged = 0

    init(_ connection: AccmonConnection) { self.connection = connection }

    mutating func plug(using random: inout SplitMix64) async throws {
        plugged += 1
        let index = plugged
        let ids = ["usb:1209:0001", "usb:1209:0001", "usb:-:-:sysfs=/sys/devices/x/\(index)", "a+b#c%d$e/\(index)"]
        let accessory = Accessory(
            kind: .usb, accessoryID: random.next(below: 3) == 0 ? ids.randomElement(using: &random)! : nil,
            name: "storm \(index)", serialNumber: "S\(index)", vendorID: "1209",
            productID: String(format: "%04x", index % 65536))
        live.append(try await connection.simulateConnect(accessory))
    }

    mutating func unplug(using random: inout SplitMix64) async throws {
        guard !live.isEmpty else { return }
        let id = live.remove(at: Int(random.next(below: UInt64(live.count))))
        try await connection.simulateDisconnect(id)
    }

    /// `steps` plugs and unplugs, more plugs than unplugs while fewer than `target` are connected.
    mutating func storm(steps: Int, target: Int, using random: inout SplitMix64) async throws {
        for _ in 0..<steps {
            if live.count < target && random.next(below: 3) != 0 || live.isEmpty {
                try await plug(using: &random)
            } else {
                try await unplug(using: &random)
            }
        }
    }
}
