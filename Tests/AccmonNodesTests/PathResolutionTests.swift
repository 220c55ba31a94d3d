import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// Nodes are opened below a directory without following links: with openat2, and with the component walk used where
/// openat2 is missing (systemd 252's seccomp filter, kernels before 5.6). Both must refuse and accept the same paths.
@Suite struct PathResolutionTests {
    static func resolve(_ name: String, _ path: String, _ directory: PathDescriptor, _ sameMount: Bool) throws(Errno)
        -> PathDescriptor
    {
        if name == "walk" { return try PathDescriptor.walk(path, beneath: directory, sameMount: sameMount) }
        return try PathDescriptor.open(path, beneath: directory, sameMount: sameMount)
    }

    @Test(arguments: ["openat2", "walk"])
    func linksEscapesAndMountCrossingsAreRefused(name: String) throws {
        let directory = try TemporaryDirectory()
        let root = directory.path
        #expect(mkdir("\(root)/sub", 0o755) == 0)
        #expect(FileManager.default.createFile(atPath: "\(root)/sub/file", contents: nil))
        #expect(symlink("file", "\(root)/sub/link") == 0)
        #expect(symlink("sub", "\(root)/dirlink") == 0)
        let base = try PathDescriptor.openDirectory(root)
        defer { base.close() }
        func outcome(_ path: String, sameMount: Bool = false, in directory: PathDescriptor? = nil) -> String {
            do throws(Errno) {
                let opened = try Self.resolve(name, path, directory ?? base, sameMount)
                defer { opened.close() }
                let status = try opened.status()
                var expected = stat()
                let reference = directory == nil ? "\(root)/\(path)" : "/\(path)"
                guard lstat(reference, &expected) == 0, UInt64(expected.st_ino) == status.inode else { return "other file" }
                return "ok"
            } catch {
                return "\(error.rawValue)"
            }
        }
        #expect(outcome("sub/file") == "ok", "\(name)")
        #expect(outcome("sub/file", sameMount: true) == "ok", "\(name)")
        #expect(outcome("sub/link") == "\(ELOOP)", "\(name): a link as the node")
        #expect(outcome("dirlink/file") == "\(ELOOP)", "\(name): a link on the way")
        #expect(outcome("../etc/passwd") == "\(EXDEV)", "\(name): an escape")
        #expect(outcome("sub/none") == "\(ENOENT)", "\(name)")
        let slash = try PathDescriptor.openDirectory("/")
        defer { slash.close() }
        #expect(outcome("proc/self/status", sameMount: true, in: slash) == "\(EXDEV)", "\(name): into /proc")
        #expect(outcome("proc/self/status", sameMount: false, in: slash) == "\(ELOOP)", "\(name): /proc/self is a link")
        #expect(outcome("proc/1/status", sameMount: false, in: slash) == "ok", "\(name)")
    }
}

/// Paths are split on their bytes, as the kernel splits them. A `/` followed by a combining mark is one Swift
/// character: split on characters, `../\u{301}x` is one component to a `..` check and two (`..` and `\u{301}x`)
/// to the kernel.
@Suite struct PathBytesTests {
    @Test(arguments: ["openat2", "walk"])
    func aSlashWithACombiningMarkIsStillASlash(name: String) throws {
        let directory = try TemporaryDirectory()
        #expect(mkdir(directory.file("below"), 0o755) == 0)
        // What an escape from below/ would reach.
        #expect(FileManager.default.createFile(atPath: directory.file("\u{301}secret"), contents: nil))
        let base = try PathDescriptor.openDirectory(directory.file("below"))
        defer { base.close() }
        #expect(throws: Errno(rawValue: EXDEV), "\(name)") {
            let opened = try PathResolutionTests.resolve(name, "../\u{301}secret", base, false)
            opened.close()
        }
    }
}
