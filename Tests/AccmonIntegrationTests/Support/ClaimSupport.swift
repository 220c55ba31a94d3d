import AccmonClient
import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Synchronization

/// A real accmond for claim tests that can be killed and started again on the same socket, state and manifest:
/// simulated accessories, a manifest of the test's choosing, the socket open to every user (for `nobody`).
final class ClaimDaemon: @unchecked Sendable {
    let directory: TemporaryDirectory
    let socketPath: String
    let flags: [String]
    private(set) var process: ChildProcess
    private var starts = 0

    /// A manifest entry allowing every accessory to root, `nobody` and the accmon group, with `claim` as given (a
    /// JSON object, or nothing).
    static func manifest(claim: String? = nil, admins: String? = nil) -> String {
        """
        {"version": 1, \(admins.map { "\"admins\": \($0)," } ?? "")
         "accessories": [{"name": "bench", "match": {"id": "*:*"},
                          "access": {"users": [0, 65534], "groups": ["accmon"]}\(claim.map { ", \"claim\": \($0)" } ?? "")}]}
        """
    }

    init(manifest: String = ClaimDaemon.manifest(), arguments: [String] = []) async throws {
        directory = try TemporaryDirectory()
        chmod(directory.path, 0o755)
        socketPath = directory.file("s")
        let manifestPath = directory.file("manifest.json")
        try manifest.write(toFile: manifestPath, atomically: true, encoding: .utf8)
        flags =
            [
                "--socket", socketPath, "--simulate", "--no-udev", "--state-dir", directory.file("state"),
                "--manifest", manifestPath, "--manifest-dir", directory.file("manifest.d"),
            ] + arguments
        process = try ChildProcess(try Binaries.accmond, flags, name: "accmond-0", directory: directory)
        try await waitUntilServing()
    }

    private func waitUntilServing() async throws {
        let up = await eventually {
            guard let probe = try? UnixSocket.connect(path: self.socketPath) else { return false }  // try?: not yet
            probe.close()
            return true
        }
        guard up else { throw Binaries.LocateError(description: "accmond did not start: \(process.stderr)") }
        chmod(socketPath, 0o666)
    }

    /// Stops accmond with `signal` and starts it again on the same state.
    func restart(signal: Int32 = SIGKILL) async throws {
        await stop(signal: signal)
        try await start()
    }

    /// Stops accmond with `signal`.
    func stop(signal: Int32 = SIGKILL) async {
        process.send(signal)
        _ = await process.waitForExit()
    }

    /// Starts accmond again on the same state, after ``stop(signal:)``.
    func start() async throws {
        starts += 1
        process = try ChildProcess(try Binaries.accmond, flags, name: "accmond-\(starts)", directory: directory)
        try await waitUntilServing()
    }

    var log: String { process.stderr }

    func connect(_ name: String = "claim-test") async throws -> AccmonConnection {
        try await AccmonConnection.connect(socketPath: socketPath, clientName: name)
    }

    /// Plugs a simulated serial adapter; returns its connection id.
    func plug(_ serial: String, port: String = "", node: String? = nil) async throws -> ConnectionID {
        let connection = try await connect("plugger")
        defer { connection.close() }
        return try await connection.simulateConnect(Self.adapter(serial, port: port, node: node))
    }

    static func adapter(_ serial: String, port: String = "", node: String? = nil) -> Accessory {
        var accessory = Accessory(
            kind: .serial, name: "FT232R USB UART", serialNumber: serial, vendorID: "0403", productID: "6001")
        accessory.portPath = port
        accessory.deviceNodes = [node ?? "/dev/ttyUSB-\(serial)"]
        accessory.accessoryID = accessory.derivedAccessoryID
        return accessory
    }

    func unplug(_ connection: ConnectionID) async throws {
        let driver = try await connect("plugger")
        defer { driver.close() }
        try await driver.simulateDisconnect(connection)
    }

    /// Runs `accmon` (optionally as another user through `setpriv`).
    func accmon(_ arguments: [String], as user: [String] = [], timeout: Duration = .seconds(20)) async throws
        -> CommandResult
    {
        let command = user + [try Binaries.accmon.path, "--socket", socketPath] + arguments
        return try await run(URL(fileURLWithPath: command[0]), Array(command.dropFirst()), in: directory, timeout: timeout)
    }

    /// Starts `accmon` as a long-running child.
    func startAccmon(_ arguments: [String], as user: [String] = [], name: String) throws -> ChildProcess {
        let command = user + [try Binaries.accmon.path, "--socket", socketPath] + arguments
        return try ChildProcess(
            URL(fileURLWithPath: command[0]), Array(command.dropFirst()), name: name, directory: directory)
    }

    deinit { process.kill() }
}

/// Collects a claim's notices for assertions.
final class NoticeLog: Sendable {
    private final class Received: Sendable {
        let notices = Mutex<[ClaimNotice]>([])
    }

    private let received = Received()
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(_ stream: AsyncStream<ClaimNotice>) {
        let started = Task { [received] in
            for await notice in stream { received.notices.withLock { $0.append(notice) } }
        }
        task.withLock { $0 = started }
    }

    var all: [ClaimNotice] { received.notices.withLock { $0 } }

    func wait(for kind: ClaimNotice.Kind, timeout: Duration = .seconds(10)) async -> ClaimNotice? {
        _ = await eventually(timeout: timeout) { self.all.contains { $0.kind == kind } }
        return all.first { $0.kind == kind }
    }

    deinit { task.withLock { $0?.cancel() } }
}

/// The pids of processes whose command line is exactly `arguments`.
func pids(running arguments: [String]) -> [pid_t] {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []  // try?: no /proc: none
    return entries.compactMap { entry in
        guard let pid = pid_t(entry),
            let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline")
        else { return nil }
        let parts = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        return parts == arguments ? pid : nil
    }
}
