import AccmonClient
import AccmonJSON
import AccmonManifest
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Glibc

/// A fresh directory under /tmp (short, for socket paths), removed in `deinit`.
final class ScratchDirectory: Sendable {
    let path: String

    init() throws {
        var template = Array("/tmp/accmon-mt-XXXXXX".utf8CString)
        guard let created = mkdtemp(&template) else { throw Binaries.LocateError(description: "mkdtemp failed") }
        path = String(cString: created)
    }

    /// Writes `text` to `name` in the directory; returns its path.
    @discardableResult
    func write(_ name: String, _ text: String) throws -> String {
        let file = "\(path)/\(name)"
        try FileManager.default.createDirectory(
            atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        return file
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)  // try?: best-effort cleanup
    }
}

/// How a command ended and what it printed.
struct Outcome: CustomStringConvertible {
    var status: Int32
    var stdout: String
    var stderr: String

    var description: String { "exit \(status); stdout: \(stdout.debugDescription); stderr: \(stderr.debugDescription)" }
}

/// Runs `executable` to completion with output in files (no pipe can fill up), polling without blocking a thread.
func runProcess(
    _ executable: URL, _ arguments: [String], in directory: ScratchDirectory, environment: [String: String] = [:],
    timeout: Duration = .seconds(20)
) async throws -> Outcome {
    let id = UUID().uuidString.prefix(8)
    let outPath = "\(directory.path)/\(id).out"
    let errPath = "\(directory.path)/\(id).err"
    _ = FileManager.default.createFile(atPath: outPath, contents: nil)
    _ = FileManager.default.createFile(atPath: errPath, contents: nil)
    let out = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
    let err = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
    defer {
        try? out.close()  // try?: cleanup
        try? err.close()  // try?: cleanup
    }
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    var merged = ProcessInfo.processInfo.environment
    merged["NO_COLOR"] = "1"
    merged.removeValue(forKey: "ACCMON_SOCKET")
    merged.merge(environment) { _, new in new }
    process.environment = merged
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let deadline = ContinuousClock.now + timeout
    while process.isRunning {
        if ContinuousClock.now > deadline {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw Binaries.LocateError(
                description: "\(executable.lastPathComponent) \(arguments): still running after \(timeout)")
        }
        try await Task.sleep(for: .milliseconds(5))
    }
    let stdout = String(decoding: FileManager.default.contents(atPath: outPath) ?? Data(), as: UTF8.self)
    let stderr = String(decoding: FileManager.default.contents(atPath: errPath) ?? Data(), as: UTF8.self)
    return Outcome(status: process.terminationStatus, stdout: stdout, stderr: stderr)
}

/// `accmon ARGUMENTS`.
func accmon(
    _ arguments: [String], in directory: ScratchDirectory, environment: [String: String] = [:]
) async throws
    -> Outcome
{
    try await runProcess(try Binaries.url("accmon"), arguments, in: directory, environment: environment)
}

/// A simulated accmond on a private socket, killed in `deinit`.
final class SimulatedDaemon: @unchecked Sendable {
    let directory: ScratchDirectory
    let socketPath: String
    let process = Process()

    init() async throws {
        directory = try ScratchDirectory()
        socketPath = "\(directory.path)/accmond.sock"
        process.executableURL = try Binaries.url("accmond")
        // A manifest that allows everything: generate must see every simulated accessory.
        let manifest = "\(directory.path)/manifest.json"
        try #"{"version": 1, "accessories": [{"name": "everything", "match": {"id": "*:*"}}]}"#.write(
            toFile: manifest, atomically: true, encoding: .utf8)
        process.arguments = [
            "--socket", socketPath, "--simulate", "--no-udev", "--state-dir", "\(directory.path)/state",
            "--manifest", manifest, "--manifest-dir", "\(directory.path)/manifest.d", "--log-level", "warning",
        ]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = try FileHandle(
            forWritingTo: {
                let path = "\(directory.path)/accmond.log"
                _ = FileManager.default.createFile(atPath: path, contents: nil)
                return URL(fileURLWithPath: path)
            }())
        try process.run()
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            if let connection = try? await AccmonConnection.connect(socketPath: socketPath, clientName: "probe") {  // try?: not up yet
                connection.close()
                return
            }
            guard process.isRunning, ContinuousClock.now < deadline else {
                let log = (try? String(contentsOfFile: "\(directory.path)/accmond.log", encoding: .utf8)) ?? ""  // try?: best effort
                throw Binaries.LocateError(description: "accmond did not start: \(log)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    func connect() async throws -> AccmonConnection {
        try await AccmonConnection.connect(socketPath: socketPath, clientName: "manifest-tests")
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}
