import AccmonClient
import AccmonDevices
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc
import Synchronization

/// What a client saw: the snapshot it subscribed with, then the live events.
protocol Observer: Sendable {
    var name: String { get }
    var snapshot: Snapshot? { get }
    var events: [AccessoryEvent] { get }
    /// Anything that went wrong on this observer's side (a parse error, the stream ending), for failure messages.
    var problems: String { get }
}

/// The real CLI: `accmon --socket S watch --json`, its stdout parsed line by line with the protocol codec.
final class CLIWatcher: Observer, @unchecked Sendable {
    let name = "accmon watch --json"
    private let process = Process()
    private let stdoutPath: String
    private let stderrPath: String
    private let parsed = Locked<(offset: Int, snapshot: Snapshot?, events: [AccessoryEvent], problems: [String])>(
        (0, nil, [], []))

    init(socketPath: String, directory: ScratchDirectory) throws {
        stdoutPath = directory.file("watch.out")
        stderrPath = directory.file("watch.err")
        _ = FileManager.default.createFile(atPath: stdoutPath, contents: nil)
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        process.executableURL = try Locations.binary("accmon")
        process.arguments = ["--socket", socketPath, "watch", "--json"]
        var environment = ProcessInfo.processInfo.environment
        environment["NO_COLOR"] = "1"
        environment.removeValue(forKey: "ACCMON_SOCKET")
        process.environment = environment
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: stdoutPath))
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: stderrPath))
        try process.run()
    }

    deinit { stop() }

    func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
    }

    /// Parses the complete lines written since the last call.
    private func refresh() {
        guard let data = FileManager.default.contents(atPath: stdoutPath) else { return }
        parsed.withLock { state in
            let bytes = [UInt8](data)
            guard state.offset < bytes.count else { return }
            let codec = ProtocolCodec()
            var start = state.offset
            while let newline = bytes[start...].firstIndex(of: 0x0A) {
                let line = bytes[start..<newline]
                start = newline + 1
                do {
                    switch try codec.decodeServerMessage(line) {
                    case .snapshot(_, let snapshot): state.snapshot = snapshot
                    case .event(let event): state.events.append(event)
                    case .shutdown: break
                    case let other: state.problems.append("unexpected line: \(other)")
                    }
                } catch {
                    state.problems.append("unreadable line \(String(decoding: line, as: UTF8.self)): \(error)")
                }
            }
            state.offset = start
        }
    }

    var snapshot: Snapshot? {
        refresh()
        return parsed.withLock { $0.snapshot }
    }

    var events: [AccessoryEvent] {
        refresh()
        return parsed.withLock { $0.events }
    }

    var problems: String {
        refresh()
        let stderr = FileManager.default.contents(atPath: stderrPath).map { String(decoding: $0, as: UTF8.self) } ?? ""
        let running = process.isRunning ? "running" : "exited \(process.terminationStatus)"
        return "(\(running)) " + parsed.withLock { $0.problems.joined(separator: "; ") } + " stderr: \(stderr)"
    }
}

/// The client library: an ``AccmonConnection`` subscribed to everything, its events collected by a task.
final class LibraryWatcher: Observer, Sendable {
    let name = "AccmonClient"
    let connection: AccmonConnection
    private let state = Locked<(snapshot: Snapshot?, events: [AccessoryEvent], problems: [String])>((nil, [], []))
    private let task = Locked<Task<Void, Never>?>(nil)

    init(socketPath: String) async throws {
        connection = try await AccmonConnection.connect(socketPath: socketPath, clientName: "udev-tests")
        let subscription = try await connection.subscribe()
        state.withLock { $0.snapshot = subscription.snapshot }
        let collector = Task { [state] in
            do {
                for try await event in subscription { state.withLock { $0.events.append(event) } }
            } catch {
                state.withLock { $0.problems.append("event stream ended: \(error)") }
            }
        }
        task.withLock { $0 = collector }
    }

    func stop() {
        connection.close()
        task.withLock { $0 }?.cancel()
    }

    var snapshot: Snapshot? { state.withLock { $0.snapshot } }
    var events: [AccessoryEvent] { state.withLock { $0.events } }
    var problems: String { state.withLock { $0.problems.joined(separator: "; ") } }
}

/// One line per event, for failure messages.
func describe(_ events: some Collection<AccessoryEvent>) -> String {
    events.map { event in
        "  seq \(event.sequence) \(event.change.rawValue) \(describe(event.accessory))"
    }.joined(separator: "\n")
}

func describe(_ accessory: Accessory) -> String {
    "\(accessory.kind.rawValue) \(accessory.usbID) conn=\(accessory.connectionID) name=\(accessory.name.debugDescription)"
        + " serial=\(accessory.serialNumber.debugDescription) nodes=\(accessory.deviceNodes) \(accessory.sysfsPath)"
}
