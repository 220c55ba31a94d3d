import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// SIGTERM and SIGINT stop a real accmond at any stage of its start-up, and it removes the socket file it bound
/// (issue 21, finding 6: a start-up step that hung made accmond unkillable by SIGTERM and left its socket file).
///
/// accmond is held at a real start-up step that waits on something outside it: the account lookups of its
/// manifest (the default access names the group `accmon`), with `/etc/group` replaced, in a mount namespace of
/// its own, by a FIFO that nobody writes, as a directory service that never answers would hold them.
@Suite(.timeLimit(.minutes(1)))
struct StartUpSignalTests {
    /// The names of the threads of process `pid`.
    static func threadNames(_ pid: pid_t) -> [String] {
        entries(of: "/proc/\(pid)/task").compactMap { task in
            (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/comm", encoding: .utf8))?  // try?: a thread gone
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// `/etc/group` replaced by a FIFO nobody writes, in a mount namespace of accmond's own: the command line that
    /// runs a program so.
    static func heldLookups(_ fifo: String) -> [String] {
        ["/usr/bin/unshare", "-m", "/bin/sh", "-c", #"mount --bind "$0" /etc/group && exec "$@""#, fifo]
    }

    /// Waits until process `pid` reads its manifest at start-up, on the thread that now waits on the FIFO.
    static func heldAtTheManifest(_ pid: pid_t) async -> Bool {
        await eventually(timeout: .seconds(10)) { threadNames(pid).contains("accmond-start") }
    }

    @Test(arguments: [SIGTERM, SIGINT])
    func aStopSignalEndsAStartUpHeldByTheAccountDatabase(signal: Int32) async throws {
        let root = try TemporaryDirectory()
        let group = root.file("group.fifo")
        try #require(mkfifo(group, 0o644) == 0)
        let state = root.file("state")
        let daemon = try StartedDaemon(in: root, stateDirectory: state, wrapper: Self.heldLookups(group))
        // The socket is bound first; then the manifest is read, on a start-up thread that now waits on the FIFO.
        let held = await Self.heldAtTheManifest(daemon.process.pid)
        #expect(daemon.socketFileExists)
        #expect(held, "accmond is not held at reading its manifest: threads \(Self.threadNames(daemon.process.pid))")
        #expect(daemon.process.isRunning, "log: \(daemon.log)")

        daemon.process.send(signal)
        let termination = await daemon.process.waitForExit(timeout: .seconds(5))
        #expect(
            termination == .exited(0), "accmond: \(termination.map(\.description) ?? "still running"): \(daemon.log)")
        #expect(!daemon.socketFileExists, "accmond left its socket file \(daemon.socketPath) behind")
        let name = signal == SIGTERM ? "SIGTERM" : "SIGINT"
        #expect(daemon.log.contains("received \(name) during start-up"), "log: \(daemon.log)")
        #expect(daemon.log.contains("stopped during start-up"), "log: \(daemon.log)")
        #expect(!daemon.log.contains("listening on"), "start-up went on after the signal: \(daemon.log)")
    }

    /// With a socket the service manager passed, a stop during start-up leaves its path alone: it is the socket
    /// unit's.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-socket-activate")))
    func aStopDuringStartUpLeavesAPassedSocketInPlace() async throws {
        let root = try TemporaryDirectory()
        let group = root.file("group.fifo")
        try #require(mkfifo(group, 0o644) == 0)
        let activated = root.file("activated.sock")
        // systemd-socket-activate, unshare and sh each exec the next in place: accmond gets the pid LISTEN_PID says.
        let activation = ["/usr/bin/systemd-socket-activate", "-l", activated] + Self.heldLookups(group)
        let daemon = try StartedDaemon(
            in: root, stateDirectory: root.file("state"), wrapper: activation, socketPath: root.file("configured.sock"))
        #expect(await eventually { FileManager.default.fileExists(atPath: activated) }, "log: \(daemon.log)")
        // The first connection starts accmond.
        let first = try UnixSocket.connect(path: activated)
        defer { first.close() }
        #expect(await Self.heldAtTheManifest(daemon.process.pid), "log: \(daemon.log)")

        daemon.process.send(SIGTERM)
        let termination = await daemon.process.waitForExit(timeout: .seconds(5))
        #expect(
            termination == .exited(0), "accmond: \(termination.map(\.description) ?? "still running"): \(daemon.log)")
        #expect(daemon.log.contains("received SIGTERM during start-up"), "log: \(daemon.log)")
        var info = stat()
        #expect(
            lstat(activated, &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK,
            "accmond removed the socket the service manager passed")
        #expect(!daemon.socketFileExists, "accmond bound --socket too")
    }
}
