import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// The file operations accmond's state goes through, on a real file system: by name in a directory opened once,
/// creating only what does not exist, reading only regular files of bounded size, and never blocking.
@Suite struct AtomicFileTests {
    static func opened(_ directory: TemporaryDirectory) throws -> DirectoryDescriptor {
        try DirectoryDescriptor.open(directory.path)
    }

    /// O_CREAT | O_EXCL | O_NOFOLLOW: a link at the name, dangling or not, fails with EEXIST; its target is neither
    /// created nor written.
    @Test func creatingANewFileNeverGoesThroughALink() throws {
        let scratch = try TemporaryDirectory()
        let directory = try Self.opened(scratch)
        defer { directory.close() }
        let target = scratch.file("target")
        try "kept\n".write(toFile: target, atomically: false, encoding: .utf8)
        symlink(target, scratch.file("to-file"))
        symlink(scratch.file("nowhere"), scratch.file("dangling"))
        for name in ["to-file", "dangling", "target"] {
            #expect(throws: Errno(rawValue: EEXIST), "\(name)") { try directory.createNew(name, mode: 0o600).close() }
        }
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "kept\n")
        #expect(!FileManager.default.fileExists(atPath: scratch.file("nowhere")))
    }

    /// A write replaces the file whole and leaves no temporary; and it goes where the directory opened is, even after
    /// its path was renamed and something else put there.
    @Test func writesGoToTheDirectoryOpenedAndLeaveNoTemporary() throws {
        let scratch = try TemporaryDirectory()
        try makeDirectory(scratch.file("state"), mode: 0o700)
        let directory = try DirectoryDescriptor.open(scratch.file("state"))
        defer { directory.close() }
        try AtomicFile.write(Array("one\n".utf8), to: "state.json", in: directory)
        try AtomicFile.write(Array("two\n".utf8), to: "state.json", in: directory)
        #expect(entries(of: scratch.file("state")) == ["state.json"])
        #expect(try AtomicFile.read("state.json", in: directory, limit: 100) == Array("two\n".utf8))

        #expect(rename(scratch.file("state"), scratch.file("moved")) == 0)
        try makeDirectory(scratch.file("elsewhere"), mode: 0o700)
        symlink(scratch.file("elsewhere"), scratch.file("state"))
        try AtomicFile.write(Array("three\n".utf8), to: "state.json", in: directory)
        #expect(try String(contentsOfFile: scratch.file("moved/state.json"), encoding: .utf8) == "three\n")
        #expect(entries(of: scratch.file("elsewhere")).isEmpty)
    }

    /// Reading: nothing for a missing file; a FIFO (not waited on), a link, a directory or a file over the limit is
    /// an error that says which.
    @Test func readsOnlyRegularFilesOfBoundedSize() throws {
        let scratch = try TemporaryDirectory()
        let directory = try Self.opened(scratch)
        defer { directory.close() }
        #expect(try AtomicFile.read("missing", in: directory, limit: 10) == nil)
        mkfifo(scratch.file("fifo"), 0o600)
        symlink("/etc/hostname", scratch.file("link"))
        try makeDirectory(scratch.file("folder"), mode: 0o700)
        try String(repeating: "x", count: 11).write(toFile: scratch.file("big"), atomically: false, encoding: .utf8)
        let expected = [
            "fifo": "not a regular file (a FIFO)", "link": "not a regular file (a symbolic link)",
            "folder": "not a regular file (a directory)", "big": "larger than 10 bytes",
        ]
        for (name, reason) in expected {
            do {
                _ = try AtomicFile.read(name, in: directory, limit: 10)
                Issue.record("\(name) was read")
            } catch {
                #expect(error.description == "'\(scratch.file(name))': \(reason)")
            }
        }
        #expect(try AtomicFile.read("big", in: directory, limit: 11) == Array(repeating: UInt8(ascii: "x"), count: 11))
    }

    /// Listing stops at the limit and says so.
    @Test func listingIsBounded() throws {
        let scratch = try TemporaryDirectory()
        for index in 0..<5 { _ = FileManager.default.createFile(atPath: scratch.file("f\(index)"), contents: nil) }
        let directory = try Self.opened(scratch)
        defer { directory.close() }
        let all = try directory.names(limit: 5)
        #expect(all.names.sorted() == ["f0", "f1", "f2", "f3", "f4"] && !all.truncated)
        let some = try directory.names(limit: 3)
        #expect(some.names.count == 3 && some.truncated)
        // Read again from the start: the listing does not move the descriptor's own offset for good.
        #expect(try directory.names(limit: 5).names.count == 5)
    }

    /// A stop signal that is pending (blocked, sent, not taken) is seen without being taken.
    @Test func aPendingStopSignalIsSeenNotTaken() throws {
        // On a thread of its own, with SIGUSR2 (nothing else in the test process uses it) blocked there: a signal
        // sent to that thread stays pending for it.
        let seen = try runOnThread {
            SignalDescriptor.block([SIGUSR2])
            let before = SignalDescriptor.firstPending(among: [SIGUSR2])
            pthread_kill(pthread_self(), SIGUSR2)
            let first = SignalDescriptor.firstPending(among: [SIGUSR2])
            let second = SignalDescriptor.firstPending(among: [SIGUSR2])
            var taken: Int32 = 0
            var set = sigset_t()
            sigemptyset(&set)
            sigaddset(&set, SIGUSR2)
            sigwait(&set, &taken)
            return [before, first, second, SignalDescriptor.firstPending(among: [SIGUSR2])]
        }
        #expect(seen == [nil, SIGUSR2, SIGUSR2, nil])
    }

    private func runOnThread(_ body: @escaping @Sendable () -> [Int32?]) throws -> [Int32?] {
        let result = ResultBox()
        try startThread(name: "signal-test") { result.set(body()) }
        return result.wait()
    }
}

private final class ResultBox: @unchecked Sendable {
    private let condition = NSCondition()
    private var value: [Int32?]?

    func set(_ value: [Int32?]) {
        condition.lock()
        self.value = value
        condition.signal()
        condition.unlock()
    }

    func wait() -> [Int32?] {
        condition.lock()
        defer { condition.unlock() }
        while value == nil { condition.wait() }
        return value!
    }
}
