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

    @Test(arguments: [SIGTERM, SIGINT])
    func aStopSignalEndsAStartUpHeldByTheAccountDatabase(signal: Int32) async throws {
        let root = try TemporaryDirectory()
        let group = root.file("group.fifo")
        try #require(mkfifo(group, 0o644) == 0)
        let state = root.file("state")
        let heldLookups = [
            "/usr/bin/unshare", "-m", "/bin/sh", "-c", #"mount --bind "$0" /etc/group && exec "$@""#, group,
        ]
        let daemon = try StartedDaemon(in: root, stateDirectory: state, wrapper: heldLookups)
        // The socket is bound first; then the manifest is read, on a start-up thread that now waits on the FIFO.
        let held = await eventually(timeout: .seconds(10)) {
            daemon.socketFileExists && Self.threadNames(daemon.process.pid).contains("accmond-start")
        }
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
}
