import Glibc

/// A directory opened once, in which files are opened, created, renamed and removed by name (`openat(2)`,
/// `renameat(2)`, `unlinkat(2)`): whatever later happens to the path that led to it (a component replaced by a
/// symbolic link, say), every operation stays in the directory that was opened and checked. A value: closing is
/// explicit (``close()``).
public struct DirectoryDescriptor: Sendable {
    /// The path it was opened by, for messages.
    public let path: String
    public let descriptor: FileDescriptor

    /// Opens the directory at `path`, following symbolic links on the way (a state directory under systemd's
    /// `DynamicUser=` is one). Never blocks: `O_NONBLOCK`, and `O_DIRECTORY` fails on anything but a directory.
    ///
    /// - Throws: `ENOTDIR` when `path` is not a directory, `ENOENT` when it does not exist.
    public static func open(_ path: String) throws(Errno) -> DirectoryDescriptor {
        let fd = try valueOrErrno { Glibc.open(path, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC) }
        return DirectoryDescriptor(path: path, descriptor: FileDescriptor(rawValue: fd))
    }

    /// Creates the directory `path` with `mode` (less the umask) unless something already exists there.
    /// - Returns: whether it created it.
    @discardableResult
    public static func create(_ path: String, mode: mode_t) throws(Errno) -> Bool {
        if mkdir(path, mode) == 0 { return true }
        let error = Errno.current
        if error.rawValue == EEXIST { return false }
        throw error
    }

    /// `path/name`, for messages.
    public func pathOf(_ name: String) -> String { path.hasSuffix("/") ? path + name : "\(path)/\(name)" }

    /// The directory's own status (`fstat(2)` of the open directory, not of the path).
    public func status() throws(Errno) -> FileStatus { try descriptor.status() }

    /// Opens `name` for reading without blocking and without becoming its controlling terminal: `O_NONBLOCK`, so
    /// that a FIFO or a device answers at once (check ``FileDescriptor/status()`` before reading), and `O_NOFOLLOW`
    /// unless `followingSymbolicLinks` (then a link there fails with `ELOOP`).
    public func openForReading(_ name: String, followingSymbolicLinks: Bool = false) throws(Errno) -> FileDescriptor {
        try FileDescriptor.openForReading(name, relativeTo: descriptor.rawValue, followingSymbolicLinks)
    }

    /// Creates `name`, which must not exist in any form, a dangling symbolic link included (`O_CREAT | O_EXCL |
    /// O_NOFOLLOW`), for writing.
    ///
    /// - Throws: `EEXIST` when something is there.
    public func createNew(_ name: String, mode: mode_t) throws(Errno) -> FileDescriptor {
        let flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC
        return FileDescriptor(rawValue: try valueOrErrno { openat(descriptor.rawValue, name, flags, mode) })
    }

    /// Opens the file `name` for appending (`O_WRONLY | O_APPEND`), without following a symbolic link
    /// (`O_NOFOLLOW`: a link there fails with `ELOOP`) and without blocking on a FIFO (`O_NONBLOCK`; check
    /// ``FileDescriptor/status()`` before writing). It must exist, unless `creatingWith` gives the mode to create it
    /// with.
    public func openForAppending(_ name: String, creatingWith mode: mode_t? = nil) throws(Errno) -> FileDescriptor {
        let flags = O_WRONLY | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (mode == nil ? 0 : O_CREAT)
        return FileDescriptor(rawValue: try valueOrErrno { openat(descriptor.rawValue, name, flags, mode ?? 0) })
    }

    /// Renames `name` to `newName` in this directory, replacing what `newName` was (`renameat(2)`).
    public func rename(_ name: String, to newName: String) throws(Errno) {
        _ = try valueOrErrno { renameat(descriptor.rawValue, name, descriptor.rawValue, newName) }
    }

    /// Removes the entry `name`, not a directory (`unlinkat(2)`): a symbolic link is removed, not its target.
    public func remove(_ name: String) throws(Errno) {
        _ = try valueOrErrno { unlinkat(descriptor.rawValue, name, 0) }
    }

    /// Flushes the directory's entries to disk (`fsync(2)` of the directory), so that a creation, a rename or a
    /// removal in it survives a crash.
    public func synchronize() throws(Errno) { try descriptor.synchronize() }

    /// The names in the directory (without `.` and `..`), at most `limit`.
    /// - Returns: the names, and whether there were more than `limit`.
    public func names(limit: Int) throws(Errno) -> (names: [String], truncated: Bool) {
        // fdopendir takes the descriptor it is given: hand it a copy, and read from the start (a copy shares the
        // offset).
        let copy = try valueOrErrno { fcntl(descriptor.rawValue, F_DUPFD_CLOEXEC, 0) }
        guard let stream = fdopendir(copy) else {
            let error = Errno.current
            Glibc.close(copy)
            throw error
        }
        defer { closedir(stream) }
        rewinddir(stream)
        var names: [String] = []
        while true {
            errno = 0
            guard let entry = readdir(stream) else {
                if errno != 0 { throw Errno.current }
                return (names, false)
            }
            let name = withUnsafePointer(to: &entry.pointee.d_name) { pointer in
                pointer.withMemoryRebound(to: CChar.self, capacity: Int(NAME_MAX) + 1) { String(cString: $0) }
            }
            if name == "." || name == ".." { continue }
            if names.count == limit { return (names, true) }
            names.append(name)
        }
    }

    /// Closes the directory.
    public func close() { descriptor.close() }
}

extension FileDescriptor {
    /// Opens `path` for reading as ``DirectoryDescriptor/openForReading(_:followingSymbolicLinks:)`` does, a relative
    /// path from the working directory.
    public static func openForReading(_ path: String, followingSymbolicLinks: Bool) throws(Errno) -> FileDescriptor {
        try openForReading(path, relativeTo: AT_FDCWD, followingSymbolicLinks)
    }

    fileprivate static func openForReading(
        _ path: String, relativeTo directory: Int32, _ followingSymbolicLinks: Bool
    ) throws(Errno) -> FileDescriptor {
        let flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (followingSymbolicLinks ? 0 : O_NOFOLLOW)
        return FileDescriptor(rawValue: try valueOrErrno { openat(directory, path, flags) })
    }
}
