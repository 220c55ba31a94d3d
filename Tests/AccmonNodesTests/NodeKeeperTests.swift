import AccmonNodes
import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// A keeper of simulated nodes below `nodes/` of a traversable temporary directory, its records in `state/`.
struct KeeperFixture {
    let directory: TemporaryDirectory
    let nodes: String
    let keeper: NodeKeeper

    init() throws {
        directory = try traversableDirectory()
        nodes = directory.file("nodes")
        try FileManager.default.createDirectory(atPath: nodes, withIntermediateDirectories: false)
        keeper = try NodeKeeper(policy: .beneath(nodes), stateDirectory: directory.file("state"))
    }

    /// A regular file below `nodes/` set to `state`.
    func node(_ name: String, _ state: NodeState) throws -> String {
        let path = "\(nodes)/\(name)"
        guard FileManager.default.createFile(atPath: path, contents: nil) else { throw Errno.current }
        try set(path, to: state)
        return path
    }

    func observed(_ path: String) async throws -> NodeState { try await observedState(path, in: directory) }

    /// Runs `sh -c script sh ARGS` as `uid` with primary group `gids[0]` and the others as supplementary groups.
    func sh(as uid: UInt32, _ gids: [UInt32], _ script: String, _ arguments: [String]) async throws -> CommandResult {
        let groups = gids.dropFirst().map(String.init).joined(separator: ",")
        return try await run(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            [
                "--reuid=\(uid)", "--regid=\(gids[0])", groups.isEmpty ? "--clear-groups" : "--groups=\(groups)", "--",
                "/bin/sh", "-c", script, "sh",
            ] + arguments, in: directory)
    }
}

@Suite
struct NodeKeeperTests {
    let dialout: UInt32 = 20

    @Test func anotherMemberOfTheGroupGetsEACCESTheHolderOpensAndReleaseRestoresExactly() async throws {
        let fixture = try KeeperFixture()
        let before = NodeState(owner: 0, group: dialout, mode: 0o660)
        let path = try fixture.node("ttyUSB0", before)
        let holder = NodeHolder(uid: 4001, gids: [4001, dialout])
        let open = #"exec 3<>"$1" && echo opened"#

        #expect(try await fixture.sh(as: 4002, [4002, dialout], open, [path]).stdout == "opened\n", "before the claim")
        let outcome = try fixture.keeper.hold(path, holder: holder)
        #expect(outcome.change == .applied && outcome.original == before)
        let refused = try await fixture.sh(as: 4002, [4002, dialout], open, [path])
        #expect(refused.termination != .exited(0) && refused.stderr.contains("Permission denied"), "\(refused)")
        #expect(try await fixture.sh(as: 4001, [4001, dialout], open, [path]).stdout == "opened\n", "the holder")
        #expect(fixture.keeper.held().nodes.map(\.path) == [path])

        let released = try fixture.keeper.release(path)
        #expect(
            released.result == .restored && released.restored == before
                && released.udevChange == ReleaseOutcome.UdevChange.none)
        #expect(try await fixture.observed(path) == before, "owner, group, mode and no ACL")
        #expect(try await fixture.sh(as: 4002, [4002, dialout], open, [path]).stdout == "opened\n", "after release")
        #expect(fixture.keeper.held().nodes.isEmpty)
    }

    @Test func anOwnerOtherThanTheHolderLosesTheNodeAndGetsItBackWithItsACL() async throws {
        let fixture = try KeeperFixture()
        let before = NodeState(
            owner: 4003, group: dialout, mode: 0o660, acl: ExtendedACL(owningGroup: .read, users: [4002: .readWrite]))
        let path = try fixture.node("ttyACM0", before)
        _ = try fixture.keeper.hold(path, holder: NodeHolder(uid: 4001, gids: [4001], grant: true))
        let chmod = try await fixture.sh(as: 4003, [4003], #"chmod 0666 "$1""#, [path])
        #expect(chmod.termination != .exited(0), "the former owner chmods the held node: \(chmod)")
        let grantedWrite = try await fixture.sh(as: 4001, [4001], #"exec 3<>"$1" && echo opened"#, [path])
        #expect(grantedWrite.stdout == "opened\n", "granted read and write: \(grantedWrite)")
        _ = try fixture.keeper.release(path)
        #expect(try await fixture.observed(path) == before)
    }

    @Test func aRewriteWhileHeldIsWhatReleaseRestores() async throws {
        let fixture = try KeeperFixture()
        let before = NodeState(owner: 0, group: dialout, mode: 0o660)
        let udev = try fixture.node("udev", before)
        let logind = try fixture.node("logind", before)
        let holder = NodeHolder(uid: 4001, gids: [4001, dialout])
        _ = try fixture.keeper.hold(udev, holder: holder)
        _ = try fixture.keeper.hold(logind, holder: holder)
        // What udev's change event does (OWNER=, GROUP=, MODE=), and what logind's uaccess does (a named user).
        #expect(try await command(["/bin/chown", "0:4101", udev], in: fixture.directory).termination == .exited(0))
        #expect(try await command(["/bin/chmod", "0640", udev], in: fixture.directory).termination == .exited(0))
        #expect(
            try await command(["/usr/bin/setfacl", "-m", "u:4003:rw", logind], in: fixture.directory).termination
                == .exited(0))

        // Applied again on the device's event: the rewrite becomes what release restores.
        let again = try fixture.keeper.hold(udev, holder: holder)
        #expect(again.change == .rewriteAdopted && again.original == NodeState(owner: 0, group: 4101, mode: 0o640))
        #expect(try await fixture.observed(udev) == again.original.enforced(holder: holder))
        let releasedUdev = try fixture.keeper.release(udev)
        #expect(!releasedUdev.rewriteAdopted, "adopted at the hold before")
        #expect(try await fixture.observed(udev) == NodeState(owner: 0, group: 4101, mode: 0o640))

        // Found at release itself.
        let releasedLogind = try fixture.keeper.release(logind)
        #expect(releasedLogind.rewriteAdopted)
        let seat = NodeState(
            owner: 0, group: dialout, mode: 0o660, acl: ExtendedACL(owningGroup: .readWrite, users: [4003: .readWrite]))
        #expect(try await fixture.observed(logind) == seat)
    }

    @Test func symbolicLinksAndNodesOutsideTheDirectoryAreRefusedUntouched() async throws {
        let fixture = try KeeperFixture()
        let before = NodeState(owner: 4003, group: dialout, mode: 0o664)
        let target = try fixture.node("target", before)
        let outside = fixture.directory.file("outside")
        #expect(FileManager.default.createFile(atPath: outside, contents: nil))
        try set(outside, to: before)
        try FileManager.default.createDirectory(atPath: "\(fixture.nodes)/sub", withIntermediateDirectories: false)
        #expect(FileManager.default.createFile(atPath: "\(fixture.nodes)/sub/inner", contents: nil))
        try set("\(fixture.nodes)/sub/inner", to: before)
        try FileManager.default.createSymbolicLink(atPath: "\(fixture.nodes)/link", withDestinationPath: target)
        try FileManager.default.createSymbolicLink(atPath: "\(fixture.nodes)/escape", withDestinationPath: outside)
        try FileManager.default.createSymbolicLink(atPath: "\(fixture.nodes)/dirlink", withDestinationPath: "sub")
        #expect(mkfifo("\(fixture.nodes)/fifo", 0o666) == 0)
        let holder = NodeHolder(uid: 4001, gids: [4001])
        let refusals: [(String, String)] = [
            ("\(fixture.nodes)/link", "a symbolic link"), ("\(fixture.nodes)/escape", "a symbolic link"),
            ("\(fixture.nodes)/dirlink/inner", "a symbolic link"), (outside, "not below"),
            ("\(fixture.nodes)/../outside", "'..'"), ("\(fixture.nodes)/./target", "'.'"),
            ("\(fixture.nodes)/sub", "a directory"),
            ("\(fixture.nodes)/fifo", "a FIFO"), ("\(fixture.nodes)/none", "no such node"), ("relative", "not below"),
        ]
        for (path, reason) in refusals {
            #expect {
                try fixture.keeper.hold(path, holder: holder)
            } throws: { error in
                "\(error)".hasPrefix("hold: \(path): ") && "\(error)".contains(reason)
            }
        }
        for path in [target, outside, "\(fixture.nodes)/sub/inner"] {
            #expect(try await fixture.observed(path) == before, "\(path) was touched")
        }
        #expect(fixture.keeper.held().nodes.isEmpty)
    }

    @Test func theProcessesThatHaveANodeOpenAreNamed() async throws {
        let fixture = try KeeperFixture()
        let path = try fixture.node("ttyUSB1", NodeState(owner: 0, group: dialout, mode: 0o664))
        let child = try ChildProcess(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            [
                "--reuid=4002", "--regid=4002", "--clear-groups", "--", "/bin/sh", "-c",
                #"exec 3<"$1"; echo ready; exec sleep 60"#,
                "sh", path,
            ], name: "opener", directory: fixture.directory)
        defer { child.kill() }
        #expect(await eventually { child.stdout == "ready\n" }, "\(child.stderr)")
        #expect(
            await eventually {
                (try? fixture.keeper.openers(of: path))?.contains(
                    NodeOpener(pid: child.pid, uid: 4002, command: "sleep")) == true
            })
        child.kill()
        #expect(try fixture.keeper.openers(of: path).contains { $0.pid == child.pid } == false)
    }

    /// A pty below the directory: on a devpts instance of its own mounted there, as a pty node outside devpts
    /// cannot be opened (a node made with mknod fails with EIO since Linux 4.7).
    @Test func aHeldPtyIsHungUpForEveryDescriptor() async throws {
        let fixture = try KeeperFixture()
        let pts = try PrivateDevpts(in: fixture.nodes)
        defer { pts.unmount() }
        let (master, number) = try openPseudoTerminal(multiplexer: "\(pts.path)/ptmx")
        defer { Glibc.close(master) }
        let path = "\(pts.path)/\(number)"
        let first = Glibc.open(path, O_RDWR | O_NOCTTY)
        let second = Glibc.open(path, O_RDWR | O_NOCTTY)
        #expect(first >= 0 && second >= 0)
        defer {
            Glibc.close(first)
            Glibc.close(second)
        }
        #expect(throws: NodeError.self) { try fixture.keeper.cut(path) }  // not held
        // devpts has no POSIX ACLs: a simulated node is then given to its holder (it could write: group tty's w).
        let holder = NodeHolder(uid: 4001, gids: [4101])
        let held = try fixture.keeper.hold(path, holder: holder)
        #expect(held.original.acl == nil && held.applied == NodeState(owner: 4001, group: 4101, mode: 0o200), "\(held)")
        let opener = try ChildProcess(
            URL(fileURLWithPath: "/bin/sh"), ["-c", #"exec 3<>"$1"; echo ready; exec sleep 60"#, "sh", path],
            name: "opener", directory: fixture.directory)
        defer { opener.kill() }
        #expect(await eventually { opener.stdout == "ready\n" }, "\(opener.stderr)")
        #expect(try fixture.keeper.openers(of: path) == [NodeOpener(pid: opener.pid, uid: 0, command: "sleep")])
        let outcome = try fixture.keeper.cut(path)
        #expect(outcome.method == .hungUp, "\(outcome)")
        for fd in [first, second] {
            var byte: UInt8 = 0x41
            #expect(Glibc.write(fd, &byte, 1) == -1 && errno == EIO, "a write after the hang-up")
            var wait = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            #expect(poll(&wait, 1, 0) == 1 && wait.revents & Int16(POLLHUP) != 0)
        }
        let file = try fixture.node("plain", NodeState(owner: 0, group: 0, mode: 0o644))
        _ = try fixture.keeper.hold(file, holder: NodeHolder(uid: 4001, gids: [4001]))
        let notCut = try fixture.keeper.cut(file)
        #expect(notCut.method == .notCut && notCut.reason?.contains("regular file") == true)
    }
}

/// A new pseudo-terminal of the devpts instance whose multiplexer is `multiplexer`: its master descriptor and its
/// number (unlockpt and ptsname_r: looked up by name, as Swift's Glibc module leaves them out without
/// _XOPEN_SOURCE; ptsname_r names it below /dev/pts, of which only the number is used).
/// A devpts instance of its own mounted at `DIR/pts` (group 4101 for its ptys): ptys a test may hold and hang up.
struct PrivateDevpts {
    let path: String

    init(in directory: String) throws {
        path = "\(directory)/pts"
        guard mkdir(path, 0o755) == 0,
            mount("devpts", path, "devpts", 0, "newinstance,ptmxmode=0666,mode=0620,gid=4101") == 0
        else { throw Errno.current }
    }

    func unmount() { umount2(path, Int32(MNT_DETACH)) }
}

func openPseudoTerminal(multiplexer: String) throws -> (master: Int32, number: String) {
    typealias Unlock = @convention(c) (Int32) -> Int32
    typealias Name = @convention(c) (Int32, UnsafeMutablePointer<CChar>, Int) -> Int32
    guard let unlock = dlsym(nil, "unlockpt"), let name = dlsym(nil, "ptsname_r") else {
        throw Binaries.LocateError(description: "unlockpt, ptsname_r: not in this C library")
    }
    let master = Glibc.open(multiplexer, O_RDWR | O_NOCTTY)
    guard master >= 0 else { throw Errno.current }
    var buffer = [CChar](repeating: 0, count: 128)
    guard unsafeBitCast(unlock, to: Unlock.self)(master) == 0,
        unsafeBitCast(name, to: Name.self)(master, &buffer, buffer.count) == 0
    else {
        Glibc.close(master)
        throw Errno.current
    }
    let path = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return (master, String(path.split(separator: "/").last ?? ""))
}

/// What a compromised accmond could send: paths that a check and the kernel read differently.
@Suite
struct NodePathAliasTests {
    /// Swift compares the whole string, the kernel reads up to the first NUL: two records for one node, two
    /// originals, and a `release-all` that left the second holder's entry on the node.
    @Test func aPathWithANulIsRefusedAndLeavesNothingBehind() async throws {
        let fixture = try KeeperFixture()
        let before = NodeState(owner: 0, group: 20, mode: 0o660)
        let path = try fixture.node("ttyUSB7", before)
        _ = try fixture.keeper.hold(path, holder: NodeHolder(uid: 4001, gids: [4001]))
        #expect {
            try fixture.keeper.hold(path + "\u{0}x", holder: NodeHolder(uid: 4002, gids: [4002]))
        } throws: { error in
            (error as? NodeError)?.code == .refused && "\(error)".contains("outside")
        }
        #expect(fixture.keeper.releaseAll().allSatisfy { $0.error == nil })
        #expect(try await fixture.observed(path) == before)
        #expect(fixture.keeper.held().nodes.isEmpty)
    }

    /// Two names of one inode are one record: a second hold through another name holds the same node again.
    @Test func twoNamesOfOneNodeAreOneRecord() async throws {
        let fixture = try KeeperFixture()
        let before = NodeState(owner: 0, group: 20, mode: 0o660)
        let path = try fixture.node("ttyUSB7", before)
        #expect(link(path, "\(fixture.nodes)/alias") == 0)
        _ = try fixture.keeper.hold(path, holder: NodeHolder(uid: 4001, gids: [4001]))
        let second = try fixture.keeper.hold("\(fixture.nodes)/alias", holder: NodeHolder(uid: 4002, gids: [4002]))
        #expect(second.change == .reapplied && second.original == before)
        #expect(fixture.keeper.held().nodes.map(\.path) == [path])
        #expect(fixture.keeper.releaseAll().count == 1)
        #expect(try await fixture.observed(path) == before)
    }

    @Test(arguments: [
        "bus/../\u{301}usb/001", "tty\u{301}USB0", "ttyUSB0 ", "tty\tUSB0", "tty\\USB0", "a/\u{0}/b", "ttyUSB0\u{7F}",
    ])
    func pathsWithBytesOutsideThePortableSetAreRefused(relative: String) throws {
        let fixture = try KeeperFixture()
        #expect {
            try fixture.keeper.hold("\(fixture.nodes)/\(relative)", holder: NodeHolder(uid: 4001, gids: [4001]))
        } throws: { error in
            (error as? NodeError)?.code == .refused
        }
    }
}
