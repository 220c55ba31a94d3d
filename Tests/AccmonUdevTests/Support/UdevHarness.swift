import AccmonTestSupport
import Foundation
import Glibc
import Synchronization

/// One reply line of the harness: a JSON object with `ok` and `op`, and the fields of its command.
struct HarnessReply: @unchecked Sendable, CustomStringConvertible {
    /// The decoded object; only read, never mutated.
    let object: [String: Any]
    let line: String

    var ok: Bool { object["ok"] as? Bool ?? false }
    var error: String? { object["error"] as? String }
    subscript(key: String) -> Any? { object[key] }
    func int(_ key: String) -> Int? { (object[key] as? NSNumber)?.intValue }
    func string(_ key: String) -> String? { object[key] as? String }
    /// `devices` of an `add` reply: role -> syspath.
    var devices: [String: String] { object["devices"] as? [String: String] ?? [:] }
    var description: String { line }
}

/// The Python umockdev harness (`Tests/umockdev/testbed.py`) with accmond inside it, driven over its stdin/stdout.
///
/// It runs as `unshare -n sh -c 'sysctl -qw net.unix.max_dgram_qlen=4096 && exec umockdev-wrapper /usr/bin/python3
/// testbed.py ...'` (`-rn` when not root): a private network namespace (so that the larger datagram queue umockdev needs leaves the host
/// untouched) under the umockdev preload, which accmond inherits. accmond's socket is a path in a scratch directory,
/// reachable from outside the namespace.
final class UdevHarness: @unchecked Sendable {
    let directory: ScratchDirectory
    let socketPath: String
    /// accmond's stderr, as the harness copies it.
    let accmondLogPath: String
    /// The harness's own stderr.
    let harnessLogPath: String
    private let process = Process()
    private let input: FileHandle
    private let lines = Locked<(complete: [String], partial: [UInt8], closed: Bool)>(([], [], false))
    private let writeLock = Locked(())

    /// Launches the harness; with `deferStart`, accmond waits for ``start()`` so that devices added first are
    /// coldplugged.
    init(accmondArguments: [String] = ["--log-level", "debug"], deferStart: Bool = true) throws {
        try UdevEnvironment.check()
        // A write to a harness that died must fail with EPIPE, not kill the test process.
        signal(SIGPIPE, SIG_IGN)
        directory = try ScratchDirectory()
        socketPath = directory.file("accmon.sock")
        accmondLogPath = directory.file("accmond.log")
        harnessLogPath = directory.file("harness.log")
        let accmond = try Locations.binary("accmond")
        _ = FileManager.default.createFile(atPath: harnessLogPath, contents: nil)
        _ = FileManager.default.createFile(atPath: accmondLogPath, contents: nil)

        var harnessArguments = [Locations.harness.path, "--accmond-log", accmondLogPath]
        if deferStart { harnessArguments.append("--defer-start") }
        // A manifest that allows every accessory: these tests are about udev, not authentication.
        let manifest = directory.file("manifest.json")
        try #"{"version": 1, "accessories": [{"name": "everything", "match": {"id": "*:*"}}]}"#.write(
            toFile: manifest, atomically: true, encoding: .utf8)
        harnessArguments += [
            accmond.path, "--socket", socketPath, "--state-dir", directory.file("state"), "--manifest", manifest,
            "--manifest-dir", directory.file("manifest.d"),
        ]
        harnessArguments += accmondArguments
        process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        process.arguments =
            [
                UdevEnvironment.unshareFlags, "sh", "-c",
                "sysctl -qw net.unix.max_dgram_qlen=4096 && exec umockdev-wrapper /usr/bin/python3 \"$0\" \"$@\"",
            ] + harnessArguments
        var environment = ProcessInfo.processInfo.environment
        environment["PYTHONUNBUFFERED"] = "1"
        environment.removeValue(forKey: "ACCMON_SOCKET")
        process.environment = environment
        let stdinPipe = Pipe()
        let stdoutPipe = Pipe()
        process.standardInput = stdinPipe
        process.standardOutput = stdoutPipe
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: harnessLogPath))
        input = stdinPipe.fileHandleForWriting
        try process.run()
        let output = stdoutPipe.fileHandleForReading
        // Replies are read on a thread of their own: a blocking read never holds a cooperative-pool thread.
        Thread.detachNewThread { [lines] in
            while true {
                let data = output.availableData
                let finished = data.isEmpty
                lines.withLock { state in
                    state.partial += data
                    while let newline = state.partial.firstIndex(of: 0x0A) {
                        state.complete.append(String(decoding: state.partial[..<newline], as: UTF8.self))
                        state.partial.removeSubrange(...newline)
                    }
                    if finished { state.closed = true }
                }
                if finished { return }
            }
        }
    }

    deinit {
        try? input.close()  // try?: EOF makes the harness stop accmond and exit
        if process.isRunning {
            let deadline = Date().addingTimeInterval(5)
            while process.isRunning && Date() < deadline { usleep(10_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }  // accmond dies with it (PDEATHSIG)
        }
    }

    /// Sends one command and waits for its reply; throws when the reply says `ok: false` (unless `allowFailure`).
    @discardableResult
    func send(
        _ command: [String: Any], timeout: Duration = .seconds(60), allowFailure: Bool = false
    ) async throws
        -> HarnessReply
    {
        let data = try JSONSerialization.data(withJSONObject: command, options: [.sortedKeys])
        let expected = lines.withLock { $0.complete.count }
        do {
            try writeLock.withLock { _ in try input.write(contentsOf: data + [0x0A]) }
        } catch {
            throw UdevTestError(
                description: "harness: cannot send \(String(decoding: data, as: UTF8.self)): \(error)\n"
                    + diagnostics())
        }
        var reply: String?
        let arrived = await eventually(timeout: timeout, interval: .milliseconds(1)) {
            let state = lines.withLock { ($0.complete.count > expected ? $0.complete[expected] : nil, $0.closed) }
            reply = state.0
            return state.0 != nil || state.1
        }
        guard arrived, let reply else {
            throw UdevTestError(
                description: "harness: no reply to \(String(decoding: data, as: UTF8.self)) "
                    + (arrived ? "(the harness exited)" : "within \(timeout)") + "\n" + diagnostics())
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(reply.utf8)) as? [String: Any] else {  // try?: reported below
            throw UdevTestError(description: "harness: reply is not a JSON object: \(reply)\n" + diagnostics())
        }
        let decoded = HarnessReply(object: object, line: reply)
        if !decoded.ok && !allowFailure {
            throw UdevTestError(
                description: "harness: \(String(decoding: data, as: UTF8.self)) failed: \(decoded.error ?? reply)\n"
                    + diagnostics())
        }
        return decoded
    }

    /// Starts accmond and waits until it listens (after its coldplug).
    func start() async throws {
        try await send(["op": "start"])
        guard FileManager.default.fileExists(atPath: socketPath) else {
            throw UdevTestError(description: "accmond started but \(socketPath) does not exist\n" + diagnostics())
        }
    }

    /// Adds an instance of `template` (see the harness's templates); returns its role -> syspath map.
    @discardableResult
    func add(
        _ template: String, _ name: String, params: [String: Any] = [:], events: Bool = true, bind: Bool = true,
        order: [String]? = nil, parent: String? = nil
    ) async throws -> [String: String] {
        var command: [String: Any] = [
            "op": "add", "template": template, "name": name, "params": params, "events": events, "bind": bind,
        ]
        if let order { command["order"] = order }
        if let parent { command["parent"] = parent }
        return try await send(command).devices
    }

    /// Replugs an unplugged instance.
    func replug(_ name: String, order: [String]? = nil) async throws {
        var command: [String: Any] = ["op": "add", "name": name]
        if let order { command["order"] = order }
        try await send(command)
    }

    /// Unplugs an instance: remove uevents child-first (or only those in `order`), then the devices leave sysfs.
    func remove(_ name: String, order: [String]? = nil, events: Bool = true, keep: Bool = false) async throws {
        var command: [String: Any] = ["op": "remove", "name": name, "events": events, "keep": keep]
        if let order { command["order"] = order }
        try await send(command)
    }

    /// Sends one raw uevent for `device` (`NAME` or `NAME.ROLE`).
    func uevent(_ device: String, _ action: String) async throws {
        try await send(["op": "uevent", "device": device, "action": action])
    }

    /// Changes sysfs attributes and udev properties of `device`, then optionally sends `uevent`.
    func set(
        _ device: String, attributes: [String: String] = [:], properties: [String: String] = [:],
        uevent: String? = nil
    ) async throws {
        var command: [String: Any] = [
            "op": "set", "device": device, "attributes": attributes, "properties": properties,
        ]
        if let uevent { command["uevent"] = uevent }
        try await send(command)
    }

    /// Waits until accmond has read every uevent sent so far.
    func sync() async throws { try await send(["op": "sync"]) }

    /// Stops accmond (SIGTERM) and the harness; returns accmond's exit code.
    func quit() async throws -> Int? {
        let reply = try await send(["op": "quit"])
        _ = await eventually(timeout: .seconds(10)) { !process.isRunning }
        return reply.int("exit")
    }

    /// accmond's stderr so far.
    var accmondLog: String {
        FileManager.default.contents(atPath: accmondLogPath).map { String(decoding: $0, as: UTF8.self) } ?? ""
    }

    /// The tails of accmond's and the harness's logs, for failure messages.
    func diagnostics(lines count: Int = 30) -> String {
        "--- accmond stderr (last \(count) lines of \(accmondLogPath)):\n\(tail(ofFile: accmondLogPath, lines: count))\n"
            + "--- harness stderr (last \(count) lines):\n\(tail(ofFile: harnessLogPath, lines: count))"
    }
}
