import AccmonTestSupport
import Foundation
import Glibc

/// An accmond started by hand, for tests of what it does at start-up with its files and signals.
struct StartedDaemon {
    let process: ChildProcess
    let socketPath: String

    /// Starts accmond on the socket `s` in `directory`, with the allow-everything manifest (its drop-ins in
    /// `directory`'s `manifest.d`) and `--state-dir stateDirectory`, run through `wrapper` when given (`setpriv`'s
    /// or `unshare`'s command line, ending where accmond's begins).
    init(
        in directory: TemporaryDirectory, stateDirectory: String, wrapper: [String] = [], socketPath: String? = nil
    ) throws {
        self.socketPath = socketPath ?? directory.file("s")
        let daemon = try Binaries.accmond.path
        let flags =
            ["--socket", self.socketPath, "--no-udev", "--simulate", "--state-dir", stateDirectory]
            + (try allowEverythingManifest(in: directory))
        let command = wrapper + [daemon] + flags
        process = try ChildProcess(
            URL(fileURLWithPath: command[0]), Array(command.dropFirst()), name: "accmond", directory: directory)
    }

    /// Whether the socket file exists.
    var socketFileExists: Bool {
        var info = stat()
        return lstat(socketPath, &info) == 0
    }

    /// What accmond logged.
    var log: String { process.stderr }
}

/// The command line that runs a program as `nobody` (uid and gid 65534, no supplementary group).
let asNobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

/// Creates a directory with exactly `mode` (whatever the umask).
func makeDirectory(_ path: String, mode: mode_t) throws {
    guard mkdir(path, 0o700) == 0, chmod(path, mode) == 0 else {
        throw Binaries.LocateError(description: "mkdir or chmod: \(path): \(String(cString: strerror(errno)))")
    }
}

/// The names in a directory.
func entries(of path: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()  // try?: none when unreadable
}
