import AccmonNodes
import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc
import Testing

/// What a process of another user can open, asked of the kernel: `setpriv` runs a shell as that user (uid, primary
/// group, supplementary groups) that tries `open` for reading, for writing, and for both, on each file, and prints
/// `101`-style lines (read, write, both).
struct KernelProbe {
    struct Opens: Equatable, CustomStringConvertible {
        var read: Bool
        var write: Bool
        var both: Bool

        init(read: Bool, write: Bool, both: Bool) {
            self.read = read
            self.write = write
            self.both = both
        }

        /// What the model says of `state` for that user.
        init(_ state: NodeState, uid: UInt32, gids: [UInt32]) {
            read = state.allows(.read, uid: uid, gids: gids)
            write = state.allows(.write, uid: uid, gids: gids)
            both = state.allows(.readWrite, uid: uid, gids: gids)
        }

        init?(line: Substring) {
            let bits = Array(line)
            guard bits.count == 3 else { return nil }
            read = bits[0] == "1"
            write = bits[1] == "1"
            both = bits[2] == "1"
        }

        var description: String { "\(read ? "r" : "-")\(write ? "w" : "-")\(both ? "+" : "-")" }
    }

    // `true` is a regular built-in: a redirection that fails makes it fail, and the shell goes on.
    static let script =
        #"for f; do r=0 w=0 b=0; true 2>/dev/null <"$f" && r=1; true 2>/dev/null >>"$f" && w=1; "#
        + #"true 2>/dev/null <>"$f" && b=1; echo "$r$w$b"; done"#

    /// What the user `uid` with `gids` (the first is its primary group) can open of `files`, in order.
    static func opens(
        uid: UInt32, gids: [UInt32], files: [String], in directory: TemporaryDirectory
    ) async throws
        -> [Opens]
    {
        let groups = gids.dropFirst().map(String.init).joined(separator: ",")
        let result = try await run(
            URL(fileURLWithPath: "/usr/bin/setpriv"),
            [
                "--reuid=\(uid)", "--regid=\(gids[0])", groups.isEmpty ? "--clear-groups" : "--groups=\(groups)", "--",
                "/bin/sh", "-c", script, "sh",
            ] + files, in: directory, timeout: .seconds(60))
        guard result.termination == .exited(0) else {
            throw Binaries.LocateError(description: "setpriv probe as uid \(uid): \(result)")
        }
        let opens = result.stdout.split(separator: "\n").compactMap(Opens.init(line:))
        guard opens.count == files.count else {
            throw Binaries.LocateError(
                description: "setpriv probe as uid \(uid): \(opens.count) of \(files.count): \(result)")
        }
        return opens
    }
}

/// A directory others may enter (setpriv's users open files in it), removed at the end.
func traversableDirectory() throws -> TemporaryDirectory {
    let directory = try TemporaryDirectory()
    guard chmod(directory.path, 0o755) == 0 else { throw Errno.current }
    return directory
}

/// Sets a file to `state` directly (chown, the ACL attribute, chmod), as the tests' reference for what a state is.
func set(_ path: String, to state: NodeState) throws {
    let directory = try PathDescriptor.openDirectory((path as NSString).deletingLastPathComponent)
    defer { directory.close() }
    let file = try PathDescriptor.open((path as NSString).lastPathComponent, beneath: directory)
    defer { file.close() }
    try file.changeOwner(to: state.owner, group: state.group)
    if let acl = state.acl {
        try file.setExtendedAttribute(PosixACLAttribute.name, to: PosixACLAttribute.encode(mode: state.mode, acl))
    } else {
        try file.removeExtendedAttribute(PosixACLAttribute.name)
    }
    try file.changeMode(to: mode_t(state.mode))
}

/// A file's state as `stat` and `getfacl` tell it, independently of the code under test.
func observedState(_ path: String, in directory: TemporaryDirectory) async throws -> NodeState {
    var info = stat()
    guard lstat(path, &info) == 0 else { throw Errno.current }
    let getfacl = try await run(
        URL(fileURLWithPath: "/usr/bin/getfacl"),
        ["--omit-header", "--numeric", "--absolute-names", "--skip-base", path],
        in: directory)
    var state = NodeState(owner: info.st_uid, group: info.st_gid, mode: UInt16(info.st_mode & 0o7777))
    let entries = getfacl.stdout.split(separator: "\n").map { String($0.split(separator: "\t")[0]) }
        .filter { !$0.hasPrefix("user::") && !$0.hasPrefix("mask::") && !$0.hasPrefix("other::") && !$0.hasPrefix("#") }
    if !entries.isEmpty {
        var acl = ExtendedACL(owningGroup: [])
        for entry in entries {
            let parts = entry.split(separator: ":", omittingEmptySubsequences: false)
            let permission = Permission(text: parts[2])!
            switch (parts[0], parts[1]) {
            case ("group", ""): acl.owningGroup = permission
            case ("user", let id): acl.users[UInt32(id)!] = permission
            default: acl.groups[UInt32(parts[1])!] = permission
            }
        }
        state.acl = acl
    }
    return state
}
