import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc

/// An accmond whose state directory is on a file system that stalls or fails writes on demand
/// (Tests/tools/faultfs.py, FUSE), both in a mount namespace of their own: nothing is mounted where other processes
/// see it, and the mount goes with the namespace.
final class FaultyDiskDaemon: @unchecked Sendable {
    let directory: TemporaryDirectory
    let socketPath: String
    /// What the state directory holds, as the test reads it (the file system's backing directory).
    let backing: String
    private let control: String
    let process: ChildProcess
    private let fileSystemPIDFile: String

    /// Starts the file system and accmond on it, with `arguments` after the usual flags.
    init(arguments: [String]) async throws {
        directory = try TemporaryDirectory()
        socketPath = directory.file("s")
        backing = directory.file("backing")
        control = directory.file("control")
        fileSystemPIDFile = directory.file("faultfs.pid")
        let mountpoint = directory.file("state")
        for path in [backing, control, mountpoint] { try makeDirectory(path, mode: 0o700) }
        let script = Repository.file("Tests/tools/faultfs.py").path
        let flags =
            ["--socket", socketPath, "--no-udev", "--simulate", "--state-dir", mountpoint]
            + (try allowEverythingManifest(in: directory)) + arguments
        // The shell starts the file system, waits until it is mounted, then becomes accmond.
        let shell = #"""
            /usr/bin/python3 "$0" "$1" "$2" "$3" 2>"$3/../faultfs.err" & echo $! > "$4"
            for _ in $(seq 500); do mountpoint -q "$2" && break; sleep 0.01; done
            shift 4; exec "$@"
            """#
        process = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/unshare"),
            [
                "-m", "--propagation", "private", "/bin/sh", "-c", shell, script, backing, mountpoint, control,
                fileSystemPIDFile, try Binaries.accmond.path,
            ] + flags,
            name: "accmond", directory: directory)
        let up = await eventually {
            guard process.isRunning else { return true }
            guard let probe = try? UnixSocket.connect(path: socketPath) else { return false }  // try?: not yet
            probe.close()
            return true
        }
        guard up, process.isRunning else {
            throw Binaries.LocateError(description: "accmond on faultfs did not start: \(process.stderr)")
        }
    }

    /// Writes to the state directory wait from now on, until ``resume()``.
    func stall() throws { try createControlFile("stall") }
    /// Writes to the state directory fail with EIO from now on, until ``resume()``.
    func fail() throws { try createControlFile("fail") }

    /// The file system reads its orders from the files in its control directory.
    private func createControlFile(_ name: String) throws {
        guard FileManager.default.createFile(atPath: "\(control)/\(name)", contents: nil) else {
            throw Binaries.LocateError(description: "faultfs: cannot create its control file \(control)/\(name)")
        }
    }
    /// The disk answers again.
    func resume() {
        unlink("\(control)/stall")
        unlink("\(control)/fail")
    }

    var log: String { process.stderr }

    deinit {
        resume()
        process.kill()
        if let text = try? String(contentsOfFile: fileSystemPIDFile, encoding: .utf8),  // try?: never started
            let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines))
        {
            Glibc.kill(pid, SIGKILL)  // the namespace, and its mount, end with its last process
        }
    }
}
