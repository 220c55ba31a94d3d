import AccmonNodes
import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Synchronization
import Testing

/// The opener scan against processes whose descriptors would make a naive scan wait forever or lie: one on a file
/// whose file system stopped answering, one on a FUSE file that says it is the held node's device
/// (Tests/tools/stallfs.py, in a mount namespace of its own).
@Suite(.serialized) struct ProcessScanTests {
    /// A process that holds `O_PATH` descriptors on `paths` until killed, started by `shell` first.
    static func holder(_ name: String, _ paths: [String], after shell: String, in directory: TemporaryDirectory) throws
        -> ChildProcess
    {
        let opens = #"import os, sys, time; fds = [os.open(p, os.O_PATH) for p in sys.argv[1:]]; "#
            + #"open(os.environ["READY"], "w").close(); print("ready", flush=True); time.sleep(600)"#
        let script = shell + "; exec /usr/bin/python3 -c '\(opens)' \"$@\""
        return try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/unshare"),
            ["-m", "--propagation", "private", "/bin/sh", "-c", script, "sh"] + paths,
            name: name, directory: directory, environment: ["READY": directory.file("\(name).ready")])
    }

    /// The scan in a thread of its own, given `seconds` to finish; `nil` when it did not.
    static func scan(_ files: [FileStatus], within seconds: Double) async -> ProcessScan.Result? {
        let outcome = Mutex<ProcessScan.Result?>(nil)
        let thread = Thread { outcome.withLock { $0 = ProcessScan.openers(ofEach: files) } }
        thread.start()
        _ = await eventually(timeout: .seconds(seconds)) { outcome.withLock { $0 != nil } }
        return outcome.withLock { $0 }
    }

    @Test func aStalledFileSystemNeitherBlocksTheScanNorFakesAnOpener() async throws {
        let directory = try TemporaryDirectory()
        let node = directory.file("ttyUSB0")
        #expect(mknod(node, S_IFCHR | 0o600, dev_t(188 << 8 | 0)) == 0)
        let mountpoint = directory.file("mnt")
        let control = directory.file("control")
        for path in [mountpoint, control] { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false) }
        let fileSystem = "/usr/bin/python3 \(Repository.file("Tests/tools/stallfs.py").path) \(mountpoint) \(control) 188:0 "
            + "2>\(directory.file("stallfs.err")) & for _ in $(seq 500); do mountpoint -q \(mountpoint) && break; sleep 0.01; done"
        let stalled = try Self.holder(
            "stalled", ["\(mountpoint)/stall", "\(mountpoint)/fake"], after: fileSystem + "; touch \(control)/go", in: directory)
        defer {
            unlink("\(control)/stall")
            stalled.kill()
        }
        #expect(await eventually(timeout: .seconds(20)) { stalled.stdout.contains("ready") }, "\(stalled.stderr)")
        // From now on the file system answers nothing about `stall`.
        #expect(FileManager.default.createFile(atPath: "\(control)/stall", contents: nil))
        let real = try Self.holder("real", [node], after: "true", in: directory)
        defer { real.kill() }
        #expect(await eventually(timeout: .seconds(20)) { real.stdout.contains("ready") })

        let file = try identityWithoutSync(node, in: .init(rawValue: AT_FDCWD))
        let started = ContinuousClock.now
        let result = await Self.scan([file], within: 10)
        #expect(result != nil, "the scan waited on the stalled file system")
        #expect(ContinuousClock.now - started < .seconds(5))
        let pids = result?.openers.first?.map(\.pid) ?? []
        #expect(pids.contains(real.pid), "the real opener: \(pids)")
        #expect(!pids.contains(stalled.pid), "the FUSE file that says it is the device: \(pids)")
        #expect(result?.complete == true)
    }

    /// A descriptor passed into a mount namespace that does not have the node's file system (accmond's `Open` into
    /// a sandbox: bubblewrap's namespace has no /dev of the host) names a mount of another namespace. The scan looked
    /// only at each process's own mounts and missed it: a broken claim left that descriptor uncut.
    @Test func aDescriptorInANamespaceWithoutTheNodesMountIsFound() async throws {
        let directory = try TemporaryDirectory()
        let fileSystem = directory.file("fs")
        try FileManager.default.createDirectory(atPath: fileSystem, withIntermediateDirectories: false)
        #expect(mount("tmpfs", fileSystem, "tmpfs", 0, "mode=0755") == 0)
        defer { umount2(fileSystem, Int32(MNT_DETACH)) }
        let node = "\(fileSystem)/ttyUSB3"
        #expect(mknod(node, S_IFCHR | 0o600, dev_t(188 << 8 | 3)) == 0)
        let script = #"import ctypes, os, subprocess, sys, time; fd = os.open(sys.argv[1], os.O_PATH); "#
            + #"assert ctypes.CDLL(None, use_errno=True).unshare(0x20000) == 0; "#
            + #"subprocess.run(["mount", "--make-rprivate", "/"], check=True); "#
            + #"subprocess.run(["umount", "-l", sys.argv[2]], check=True); "#
            + #"print("ready", os.path.exists(sys.argv[1]), flush=True); time.sleep(600)"#
        let holder = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/python3"), ["-c", script, node, fileSystem], name: "elsewhere",
            directory: directory)
        defer { holder.kill() }
        #expect(await eventually(timeout: .seconds(20)) { holder.stdout.contains("ready") }, "\(holder.stderr)")
        #expect(holder.stdout.contains("ready False"), "the node's file system is gone from its namespace")
        let file = try identityWithoutSync(node, in: .init(rawValue: AT_FDCWD))
        let result = ProcessScan.openers(ofEach: [file])
        #expect(result.openers.first?.map(\.pid).contains(holder.pid) == true, "\(result)")
        #expect(result.complete)
    }

    /// A scan that reaches its time limit stops and says so.
    @Test func aScanPastItsTimeLimitSaysItIsIncomplete() throws {
        let directory = try TemporaryDirectory()
        let path = directory.file("file")
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        let file = try identityWithoutSync(path, in: .init(rawValue: AT_FDCWD))
        #expect(ProcessScan.openers(ofEach: [file], timeLimit: .zero).complete == false)
        #expect(ProcessScan.openers(ofEach: [file], timeLimit: .seconds(5)).complete == true)
    }
}
