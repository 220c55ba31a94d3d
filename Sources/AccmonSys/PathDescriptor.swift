import CAccmonShims
import Glibc

/// A file opened with `O_PATH`: the descriptor pins one inode without opening it for reading or writing (a device
/// node's driver is never called), and every later operation acts on that inode, whatever happens to the path
/// meanwhile (a rename, a symbolic link planted in its place). Owner, mode and extended attributes are changed
/// through the descriptor (`fchownat(AT_EMPTY_PATH)`, and `/proc/self/fd/N` for the calls that take only a path).
/// A value: closing is explicit (``close()``).
public struct PathDescriptor: Sendable {
    public let descriptor: FileDescriptor

    public init(_ descriptor: FileDescriptor) { self.descriptor = descriptor }

    /// Opens the directory at `path`, following symbolic links (the caller chose it), as an `O_PATH` descriptor.
    public static func openDirectory(_ path: String) throws(Errno) -> PathDescriptor {
        PathDescriptor(FileDescriptor(rawValue: try valueOrErrno { CAccmonShims_openDirectoryPath(path) }))
    }

    /// Opens `relativePath` below `directory` without following any symbolic link (`openat2(2)` with
    /// `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS`, `O_PATH | O_NOFOLLOW`): a link as any
    /// component, the last one included (`ELOOP`, where `O_NOFOLLOW` alone would open the link itself), and a `..`
    /// that would leave `directory`, fail. With `sameMount`, a
    /// component that crosses a mount point fails too (`RESOLVE_NO_XDEV`).
    ///
    /// - Throws: `ELOOP` for a symbolic link, `EXDEV` for an escape or a mount crossing, `ENOENT`, `ENOSYS` on a
    ///   kernel without openat2 (before 5.6).
    ///
    /// Where openat2 is missing (`ENOSYS`: a kernel before 5.6, or a seccomp filter that does not know it, as
    /// systemd 252's `@system-service`), the path is walked one component at a time instead, each opened `O_PATH |
    /// O_NOFOLLOW` relative to the one before and checked with `fstat`: a symbolic link fails with `ELOOP`, a `.` or
    /// `..` component with `EXDEV`, and with `sameMount` a component on another file system with `EXDEV` (a bind
    /// mount of the same file system is not seen, unlike with `RESOLVE_NO_XDEV`).
    public static func open(
        _ relativePath: String, beneath directory: PathDescriptor, sameMount: Bool = false
    ) throws(Errno) -> PathDescriptor {
        do throws(Errno) {
            let fd = try valueOrErrno {
                CAccmonShims_openPathBeneath(directory.descriptor.rawValue, relativePath, sameMount ? 1 : 0)
            }
            // O_PATH | O_NOFOLLOW opens a final symbolic link itself rather than failing: refuse it here.
            let opened = FileDescriptor(rawValue: fd)
            if (try? opened.status().kind) == .symbolicLink {  // try?: an fstat failure is found by the caller
                opened.close()
                throw Errno(rawValue: ELOOP)
            }
            return PathDescriptor(opened)
        } catch where error.rawValue == ENOSYS {
            return try walk(relativePath, beneath: directory, sameMount: sameMount)
        }
    }

    /// Whether openat2 works here: not a kernel before 5.6, nor a seccomp filter that refuses it (`ENOSYS`).
    public static func hasOpenat2(_ directory: PathDescriptor) -> Bool {
        let fd = CAccmonShims_openPathBeneath(directory.descriptor.rawValue, ".", 0)
        if fd >= 0 { Glibc.close(fd) }
        return fd >= 0 || errno != ENOSYS
    }

    /// ``open(_:beneath:sameMount:)`` without openat2, as it falls back to (public for its tests).
    public static func walk(_ relativePath: String, beneath directory: PathDescriptor, sameMount: Bool) throws(Errno)
        -> PathDescriptor
    {
        // Split on bytes, as the kernel does: a `/` followed by a combining mark is one Swift character, and a
        // component that still held a `/` would be resolved by openat as several, `..` among them. A NUL would end
        // the path for the kernel.
        let bytes = Array(relativePath.utf8)
        guard !bytes.contains(0) else { throw Errno(rawValue: EINVAL) }
        let components = bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: true).map {
            String(decoding: $0, as: UTF8.self)
        }
        guard !components.isEmpty, bytes.first != UInt8(ascii: "/") else { throw Errno(rawValue: EXDEV) }
        guard components.allSatisfy({ !$0.utf8.elementsEqual(".".utf8) && !$0.utf8.elementsEqual("..".utf8) }) else {
            throw Errno(rawValue: EXDEV)
        }
        let fileSystem = try directory.status().fileSystem
        var current = directory.descriptor
        var owned = false
        defer { if owned { current.close() } }
        for (index, component) in components.enumerated() {
            let fd = try valueOrErrno {
                openat(current.rawValue, component, CAccmonShims_pathFlag() | O_NOFOLLOW | O_CLOEXEC)
            }
            let next = FileDescriptor(rawValue: fd)
            let status: FileStatus
            do throws(Errno) {
                status = try next.status()
            } catch {
                next.close()
                throw error
            }
            let last = index == components.count - 1
            let refusal: Int32? =
                status.kind == .symbolicLink
                ? ELOOP : sameMount && status.fileSystem != fileSystem ? EXDEV : !last && status.kind != .directory
                    ? ENOTDIR : nil
            if let refusal {
                next.close()
                throw Errno(rawValue: refusal)
            }
            if owned { current.close() }
            current = next
            owned = !last
        }
        return PathDescriptor(current)
    }

    /// The path through which calls that take only a path reach this inode: `/proc/self/fd/N`, a magic link the
    /// kernel resolves to the pinned inode itself, never by name.
    public var procPath: String { "/proc/self/fd/\(descriptor.rawValue)" }

    /// The file's status (`fstat(2)` of the descriptor).
    public func status() throws(Errno) -> FileStatus { try descriptor.status() }

    /// Changes the owner and group (`fchownat(fd, "", uid, gid, AT_EMPTY_PATH)`; needs `CAP_CHOWN`). The kernel
    /// clears the set-user-ID and set-group-ID bits as it does so: set the mode afterwards.
    public func changeOwner(to owner: uid_t, group: gid_t) throws(Errno) {
        _ = try valueOrErrno { CAccmonShims_changeOwner(descriptor.rawValue, owner, group) }
    }

    /// Sets the permission bits (`chmod(2)` of ``procPath``; needs ownership or `CAP_FOWNER`). With a POSIX ACL
    /// present, the group bits set its mask entry, as `chmod` always does.
    public func changeMode(to permissions: mode_t) throws(Errno) {
        _ = try valueOrErrno { chmod(procPath, permissions & 0o7777) }
    }

    /// The extended attribute `name`, or `nil` when the file has none of that name (`ENODATA`).
    public func extendedAttribute(_ name: String) throws(Errno) -> [UInt8]? {
        var capacity = 256
        while true {
            var bytes = [UInt8](repeating: 0, count: capacity)
            let count = bytes.withUnsafeMutableBytes { getxattr(procPath, name, $0.baseAddress, $0.count) }
            if count >= 0 { return Array(bytes.prefix(count)) }
            let error = Errno.current
            switch error.rawValue {
            case ENODATA: return nil
            case ERANGE where capacity < 1 << 16: capacity *= 4
            case EINTR: continue
            default: throw error
            }
        }
    }

    /// Sets the extended attribute `name` to `value` (`setxattr(2)` of ``procPath``).
    public func setExtendedAttribute(_ name: String, to value: [UInt8]) throws(Errno) {
        _ = try valueOrErrno { value.withUnsafeBytes { setxattr(procPath, name, $0.baseAddress, $0.count, 0) } }
    }

    /// Removes the extended attribute `name`; returns whether there was one.
    @discardableResult
    public func removeExtendedAttribute(_ name: String) throws(Errno) -> Bool {
        if removexattr(procPath, name) == 0 { return true }
        let error = Errno.current
        if error.rawValue == ENODATA { return false }
        throw error
    }

    /// Opens the pinned inode for I/O through ``procPath`` (`O_NOCTTY | O_NONBLOCK | O_CLOEXEC` added to `flags`):
    /// the permission check of a real open applies, and a device node's driver is called.
    public func reopen(_ flags: Int32) throws(Errno) -> FileDescriptor {
        FileDescriptor(rawValue: try valueOrErrno { Glibc.open(procPath, flags | O_NOCTTY | O_NONBLOCK | O_CLOEXEC) })
    }

    /// Closes the descriptor.
    public func close() { descriptor.close() }
}

extension FileDescriptor {
    /// Whether the open file is a terminal (`isatty(3)`).
    public var isTerminal: Bool { isatty(rawValue) == 1 }

    /// Hangs the terminal up for every descriptor open on it, in every process (`ioctl(TIOCVHANGUP)`, as
    /// `vhangup(2)`; needs `CAP_SYS_ADMIN`): their reads return end of file, writes fail with `EIO`, polls report
    /// `POLLHUP`.
    public func hangUpTerminal() throws(Errno) {
        _ = try valueOrErrno { CAccmonShims_hangUpTerminal(rawValue) }
    }
}

/// The status of the file at `path`, following symbolic links (`stat(2)`), such as `/proc/PID/fd/N`.
public func fileStatus(atPath path: String) throws(Errno) -> FileStatus {
    var info = stat()
    _ = try valueOrErrno { stat(path, &info) }
    return FileStatus(info)
}

/// The status of `name` in the directory `directory` (`fstatat(2)`), following a symbolic link when asked.
public func fileStatus(_ name: String, in directory: FileDescriptor, following: Bool) throws(Errno) -> FileStatus {
    var info = stat()
    _ = try valueOrErrno { fstatat(directory.rawValue, name, &info, following ? 0 : AT_SYMLINK_NOFOLLOW) }
    return FileStatus(info)
}

/// Writes `value` to the file at `path` (a sysfs attribute such as `authorized` or `uevent`), opened for writing
/// only, without following a final symbolic link, in one `write`.
public func writeAttributeFile(_ path: String, _ value: String) throws(Errno) {
    let file = FileDescriptor(rawValue: try valueOrErrno { Glibc.open(path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC) })
    defer { file.close() }
    try file.writeAll(Array(value.utf8))
}
