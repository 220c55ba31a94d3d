import Foundation
import Glibc
import Synchronization

/// How a child process ended.
public enum Termination: Equatable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)

    public var description: String {
        switch self {
        case .exited(let code): "exit \(code)"
        case .signaled(let signal): "killed by signal \(signal)"
        }
    }
}

/// A child process whose stdout and stderr go to files, killed and reaped in `deinit` if still running.
///
/// Spawned with `posix_spawn` and reaped with `waitpid(pid, WNOHANG)` by this class alone. Foundation's `Process`
/// is not used: it learns of a child's exit from a socket the child inherits, and makes a blocking `waitpid` on its
/// one monitor thread when that socket closes, so a child that closes inherited descriptors while it keeps running
/// (`systemd-socket-activate` does, before it execs the daemon) would stall every other child's exit in the test
/// process. Waiting polls with a timeout, so no thread of the cooperative pool is held.
///
/// The child inherits no descriptor but its standard input, output and error. Tests run in parallel: a descriptor
/// another test holds at the moment of the spawn (a client socket, or the socket through which Foundation's `Process`
/// learns that its child exited) must not stay open in this child for as long as it runs, or that test waits in vain
/// for an end of file (a `waitUntilExit` stuck that way once blocked the cooperative pool and hung the whole suite).
public final class ChildProcess: @unchecked Sendable {
    public let name: String
    public let stdoutPath: String
    public let stderrPath: String
    public let pid: pid_t
    private let ended = Mutex<Termination?>(nil)

    /// Starts `executable` with `arguments`; output goes to `<directory>/<name>.out` and `.err`.
    ///
    /// The child gets the test's environment without `ACCMON_SOCKET`, with `NO_COLOR=1` and `environment` on top,
    /// every signal at its default action and none blocked, `/dev/null` as standard input, and no other descriptor.
    public init(
        _ executable: URL, _ arguments: [String], name: String, directory: TemporaryDirectory,
        environment: [String: String] = [:]
    ) throws {
        self.name = name
        stdoutPath = directory.file("\(name).out")
        stderrPath = directory.file("\(name).err")
        var merged = ProcessInfo.processInfo.environment
        merged["NO_COLOR"] = "1"
        merged.removeValue(forKey: "ACCMON_SOCKET")
        for (key, value) in environment { merged[key] = value }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        guard let closeFrom = Self.addCloseFrom, closeFrom(&actions, 3) == 0 else {
            throw Binaries.LocateError(description: "posix_spawn_file_actions_addclosefrom_np: not in this C library")
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv = ([executable.path] + arguments).map { strdup($0) } + [nil]
        let envp = merged.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var child: pid_t = 0
        let result = posix_spawn(&child, executable.path, &actions, &attributes, argv, envp)
        guard result == 0 else {
            throw Binaries.LocateError(
                description: "posix_spawn: \(executable.path): \(String(cString: strerror(result)))")
        }
        pid = child
    }

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), looked up by name because Swift's Glibc
    /// module leaves it out (it needs `_GNU_SOURCE`): the child closes every descriptor from the given one up.
    private static let addCloseFrom: AddCloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map {
        unsafeBitCast($0, to: AddCloseFrom.self)
    }

    /// Reaps the child if it has ended; returns how it ended.
    private func reap(blocking: Bool = false) -> Termination? {
        ended.withLock { ended in
            if let ended { return ended }
            var status: Int32 = 0
            var result: pid_t
            repeat {
                result = waitpid(pid, &status, blocking ? 0 : WNOHANG)
            } while result == -1 && errno == EINTR
            guard result == pid else { return nil }
            let signal = status & 0x7F
            ended = signal == 0 ? .exited((status >> 8) & 0xFF) : .signaled(signal)
            return ended
        }
    }

    public var isRunning: Bool { reap() == nil }

    /// Sends `signal` if the process still runs.
    public func send(_ signal: Int32) {
        if isRunning { Glibc.kill(pid, signal) }
    }

    /// What the process wrote to stdout so far.
    public var stdout: String { (try? String(contentsOfFile: stdoutPath, encoding: .utf8)) ?? "" }  // try?: unreadable = empty
    /// What the process wrote to stderr so far.
    public var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }  // try?: unreadable = empty

    /// Waits up to `timeout` for the process to end; `nil` if it still runs.
    public func waitForExit(timeout: Duration = .seconds(10)) async -> Termination? {
        let ended = await eventually(timeout: timeout, interval: .milliseconds(5)) { !isRunning }
        guard ended else { return nil }
        return termination
    }

    /// How the process ended; `nil` while it runs.
    public var termination: Termination? { reap() }

    /// Kills the process (SIGKILL) and reaps it.
    public func kill() {
        guard isRunning else { return }
        Glibc.kill(pid, SIGKILL)
        _ = reap(blocking: true)
    }

    deinit { kill() }
}

/// The outcome of a short-lived command.
public struct CommandResult: CustomStringConvertible {
    public var termination: Termination
    public var stdout: String
    public var stderr: String

    public var description: String {
        "\(termination); stdout: \(stdout.debugDescription); stderr: \(stderr.debugDescription)"
    }
}

/// Runs `executable` to completion (killing it after `timeout`) and returns its exit and output.
public func run(
    _ executable: URL, _ arguments: [String], in directory: TemporaryDirectory, environment: [String: String] = [:],
    timeout: Duration = .seconds(15)
) async throws -> CommandResult {
    let name = "cmd-\(UUID().uuidString.prefix(8))"
    let child = try ChildProcess(executable, arguments, name: name, directory: directory, environment: environment)
    guard let termination = await child.waitForExit(timeout: timeout) else {
        child.kill()
        throw Binaries.LocateError(
            description: "\(executable.lastPathComponent) \(arguments.joined(separator: " ")): still running after "
                + "\(timeout); stderr: \(child.stderr)")
    }
    return CommandResult(termination: termination, stdout: child.stdout, stderr: child.stderr)
}

/// Polls `condition` every `interval` until it holds or `timeout` passes; returns whether it held.
public func eventually(
    timeout: Duration = .seconds(10), interval: Duration = .milliseconds(2), _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now + timeout
    while true {
        if try await condition() { return true }
        if clock.now >= deadline { return false }
        try? await Task.sleep(for: interval)  // try?: a cancelled sleep just polls again until the deadline
    }
}
