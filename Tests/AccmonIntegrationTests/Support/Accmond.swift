import AccmonClient
import AccmonProtocol
import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Synchronization

/// Writes a manifest that allows every accessory (to root and the accmon group) and returns accmond's flags for it.
func allowEverythingManifest(in directory: TemporaryDirectory) throws -> [String] {
    let path = directory.file("manifest.json")
    try #"{"version": 1, "accessories": [{"name": "everything", "match": {"id": "*:*"}}]}"#.write(
        toFile: path, atomically: true, encoding: .utf8)
    return ["--manifest", path, "--manifest-dir", directory.file("manifest.d")]
}

/// A real `accmond` on a socket in a fresh temporary directory; killed and reaped in `deinit`.
final class Accmond: @unchecked Sendable {
    let directory: TemporaryDirectory
    let socketPath: String
    let process: ChildProcess

    /// Starts accmond and waits until its socket accepts connections.
    ///
    /// - Parameters:
    ///   - simulate: pass `--simulate`.
    ///   - logLevel: `--log-level`.
    ///   - arguments: more flags, such as `["--max-client-buffer", "65536"]`.
    ///   - wrapper: a command that runs accmond, such as `["/usr/bin/prlimit", "--nofile=48:48"]`.
    static func start(
        simulate: Bool = true, logLevel: String = "info", arguments: [String] = [], wrapper: [String] = []
    ) async throws -> Accmond {
        let directory = try TemporaryDirectory()
        let socketPath = directory.file("accmond.sock")
        // Its own state directory (never /var/lib/accmon, shared by every daemon) and no udev: only simulated
        // accessories, so that counters start fresh and nothing from the host shows up.
        var flags = [
            "--socket", socketPath, "--log-level", logLevel, "--state-dir", directory.file("state"), "--no-udev",
        ]
        flags += try allowEverythingManifest(in: directory)
        if simulate { flags.append("--simulate") }
        let process =
            wrapper.isEmpty
            ? try ChildProcess(try Binaries.accmond, flags + arguments, name: "accmond", directory: directory)
            : try ChildProcess(
                URL(fileURLWithPath: wrapper[0]), wrapper.dropFirst() + [try Binaries.accmond.path] + flags + arguments,
                name: "accmond", directory: directory)
        let daemon = Accmond(directory: directory, socketPath: socketPath, process: process)
        try await daemon.waitUntilAccepting()
        return daemon
    }

    private init(directory: TemporaryDirectory, socketPath: String, process: ChildProcess) {
        self.directory = directory
        self.socketPath = socketPath
        self.process = process
    }

    private func waitUntilAccepting(timeout: Duration = .seconds(10)) async throws {
        var lastError = "no attempt"
        let accepted = await eventually(timeout: timeout, interval: .milliseconds(5)) {
            guard process.isRunning else { return true }
            do {
                let probe = try UnixSocket.connect(path: socketPath)
                probe.close()
                return true
            } catch {
                lastError = "\(error)"
                return false
            }
        }
        guard process.isRunning else {
            throw Binaries.LocateError(
                description: "accmond exited at start (\(process.termination.map(\.description) ?? "?")): \(log)")
        }
        guard accepted else {
            throw Binaries.LocateError(
                description: "accmond: socket \(socketPath) does not accept after \(timeout) (\(lastError)): \(log)")
        }
    }

    /// accmond's stderr so far.
    var log: String { process.stderr }

    /// A library connection to this daemon.
    func connect(_ clientName: String = "integration-test") async throws -> AccmonConnection {
        try await AccmonConnection.connect(socketPath: socketPath, clientName: clientName)
    }

    /// Runs the `accmon` CLI against this daemon (`--socket` first) and returns its exit and output.
    func accmon(_ arguments: [String], timeout: Duration = .seconds(15)) async throws -> CommandResult {
        try await run(try Binaries.accmon, ["--socket", socketPath] + arguments, in: directory, timeout: timeout)
    }

    /// Starts the `accmon` CLI against this daemon as a long-running child (such as `watch`).
    func startAccmon(_ arguments: [String], name: String) throws -> ChildProcess {
        try ChildProcess(try Binaries.accmon, ["--socket", socketPath] + arguments, name: name, directory: directory)
    }

    /// Whether the socket file exists.
    /// Lets every user reach the socket (the directory 0755, the socket 0666), for clients run as `nobody`.
    func openToEveryone() {
        chmod(directory.path, 0o755)
        chmod(socketPath, 0o666)
    }

    /// The daemon's CPU time so far (user + system), in seconds, from `/proc/PID/stat`.
    var cpuSeconds: Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(process.pid)/stat", encoding: .utf8),  // try?: gone = 0
            let close = stat.lastIndex(of: ")")
        else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// The daemon's resident memory (`VmRSS`), in bytes.
    var residentBytes: Double {
        guard let status = try? String(contentsOfFile: "/proc/\(process.pid)/status", encoding: .utf8),  // try?: 0
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kib = Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
        else { return 0 }
        return kib * 1024
    }

    var socketFileExists: Bool {
        var info = stat()
        return lstat(socketPath, &info) == 0
    }

    deinit {
        process.kill()
    }
}

/// Collects a subscription's events on a task of its own, for assertions from the test.
final class EventLog: Sendable {
    private struct State {
        var events: [AccessoryEvent] = []
        var ended = false
        var error: (any Error)?
    }
    private let state = Mutex(State())
    let snapshot: Snapshot
    private let task: Mutex<Task<Void, Never>?> = Mutex(nil)

    init(_ subscription: AccessorySubscription) {
        snapshot = subscription.snapshot
        let task = Task { [self] in
            do {
                for try await event in subscription {
                    state.withLock { $0.events.append(event) }
                }
                state.withLock { $0.ended = true }
            } catch {
                state.withLock {
                    $0.ended = true
                    $0.error = error
                }
            }
        }
        self.task.withLock { $0 = task }
    }

    var events: [AccessoryEvent] { state.withLock { $0.events } }
    var count: Int { state.withLock { $0.events.count } }
    var ended: Bool { state.withLock { $0.ended } }
    /// The error that ended the sequence, if it threw.
    var error: (any Error)? { state.withLock { $0.error } }

    /// Waits until at least `count` events arrived; returns whether they did in time.
    func waitForCount(_ count: Int, timeout: Duration = .seconds(10)) async -> Bool {
        await eventually(timeout: timeout) { self.count >= count }
    }

    /// Waits until `condition` holds for the events received so far.
    func waitUntil(timeout: Duration = .seconds(10), _ condition: @escaping ([AccessoryEvent]) -> Bool) async -> Bool {
        await eventually(timeout: timeout) { condition(events) }
    }

    /// Waits until the sequence ends.
    func waitForEnd(timeout: Duration = .seconds(10)) async -> Bool {
        await eventually(timeout: timeout) { ended }
    }

    deinit { task.withLock { $0?.cancel() } }
}

/// Closes every connection when it goes out of scope, so a failing test leaves no reader thread behind.
final class ConnectionBag: @unchecked Sendable {
    private let connections = Mutex<[AccmonConnection]>([])

    @discardableResult
    func add(_ connection: AccmonConnection) -> AccmonConnection {
        connections.withLock { $0.append(connection) }
        return connection
    }

    func closeAll() {
        for connection in connections.withLock({ $0 }) { connection.close() }
    }

    deinit { closeAll() }
}
