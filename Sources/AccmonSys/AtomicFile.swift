import Glibc

/// An error reading or writing a file: what was done, the path, and why it failed.
public struct FileError: Error, Sendable, CustomStringConvertible {
    /// The system call, such as `rename`; empty when the file was found unfit rather than a call failing.
    public var operation: String
    /// The file.
    public var path: String
    /// Why: the system error's text, or what is wrong with the file ("not a regular file (a FIFO)").
    public var reason: String
    /// The system error, when a call failed.
    public var errno: Errno?

    /// A failed system call.
    public init(operation: String, path: String, errno: Errno) {
        self.operation = operation
        self.path = path
        reason = errno.description
        self.errno = errno
    }

    /// A file found unfit for use.
    public init(path: String, reason: String) {
        operation = ""
        self.path = path
        self.reason = reason
        errno = nil
    }

    public var description: String {
        operation.isEmpty ? "'\(path)': \(reason)" : "\(operation): '\(path)': \(reason)"
    }
}

/// Whole-file operations for a daemon's state, each by name in a directory opened once (``DirectoryDescriptor``), so
/// that nothing planted in that directory (a symbolic link, a FIFO) is followed, written through or waited on.
public enum AtomicFile {
    /// The start of the names of `name`'s temporaries: `name.tmp`. A temporary left by a crash has such a name; so
    /// has the fixed one earlier versions used.
    public static func temporaryPrefix(of name: String) -> String { "\(name).tmp" }

    /// Replaces `name` with `bytes` so that a crash leaves the old or the new content, never a mix: writes a new
    /// temporary file beside it (a fresh random name, created with `O_EXCL | O_NOFOLLOW`: a file or a link already
    /// there is never opened), fsyncs it, renames it over `name`, then fsyncs the directory.
    public static func write(
        _ bytes: [UInt8], to name: String, in directory: DirectoryDescriptor, mode: mode_t = 0o600
    ) throws(FileError) {
        try write(chunks: CollectionOfOne(bytes), to: name, in: directory, mode: mode)
    }

    /// Replaces `name` as ``write(_:to:in:mode:)`` does, with the concatenation of `chunks`, each made only when it
    /// is written: a large file never has to be whole in memory.
    public static func write(
        chunks: some Sequence<[UInt8]>, to name: String, in directory: DirectoryDescriptor, mode: mode_t = 0o600
    ) throws(FileError) {
        try write(to: name, in: directory, mode: mode) { file throws(Errno) in
            for chunk in chunks { try file.writeAll(chunk) }
        }
    }

    /// Replaces `name` as ``write(_:to:in:mode:)`` does, with what `write` writes to the new file (its descriptor,
    /// open for writing); an error `write` throws leaves `name` as it was.
    public static func write(
        to name: String, in directory: DirectoryDescriptor, mode: mode_t = 0o600,
        _ write: (FileDescriptor) throws(Errno) -> Void
    ) throws(FileError) {
        let (temporary, file) = try createTemporary(for: name, in: directory, mode: mode)
        do throws(Errno) {
            defer { file.close() }
            try write(file)
            try file.synchronize()
        } catch {
            try? directory.remove(temporary)  // try?: the write's error is the one to report
            throw FileError(operation: "write", path: directory.pathOf(temporary), errno: error)
        }
        do throws(Errno) {
            try directory.rename(temporary, to: name)
        } catch {
            try? directory.remove(temporary)  // try?: the rename's error is the one to report
            throw FileError(operation: "rename", path: directory.pathOf(name), errno: error)
        }
        do throws(Errno) {
            try directory.synchronize()
        } catch {
            throw FileError(operation: "fsync", path: directory.path, errno: error)
        }
    }

    /// Creates a new, empty temporary file for `name` in `directory`, under a fresh random name that starts with
    /// ``temporaryPrefix(of:)``; returns its name and descriptor, open for writing.
    public static func createTemporary(
        for name: String, in directory: DirectoryDescriptor, mode: mode_t = 0o600
    ) throws(FileError) -> (name: String, file: FileDescriptor) {
        var attempts = 0
        while true {
            let candidate = "\(temporaryPrefix(of: name))-\(randomHex())"
            do throws(Errno) {
                return (candidate, try directory.createNew(candidate, mode: mode))
            } catch {
                attempts += 1
                // Something holds this random name already: a leftover or a plant. Another name will do.
                if error.rawValue == EEXIST && attempts < 16 { continue }
                throw FileError(operation: "open", path: directory.pathOf(candidate), errno: error)
            }
        }
    }

    /// Reads the whole regular file `name` of at most `limit` bytes; `nil` when it does not exist.
    ///
    /// It is opened without following a symbolic link and without blocking, and checked to be a regular file
    /// before it is read: a link, a FIFO, a device or a directory there is an error saying which, never a wait.
    public static func read(_ name: String, in directory: DirectoryDescriptor, limit: Int) throws(FileError) -> [UInt8]?
    {
        let path = directory.pathOf(name)
        let file: FileDescriptor
        do throws(Errno) {
            file = try directory.openForReading(name)
        } catch {
            switch error.rawValue {
            case ENOENT: return nil
            case ELOOP: throw FileError(path: path, reason: "not a regular file (\(FileStatus.Kind.symbolicLink))")
            default: throw FileError(operation: "open", path: path, errno: error)
            }
        }
        defer { file.close() }
        return try readRegularFile(file, path: path, limit: limit)
    }

    /// Reads the whole regular file at `path` (a symbolic link is followed: an admin may link a configuration file
    /// into place) of at most `limit` bytes; `nil` when it does not exist. As ``read(_:in:limit:)``, it is opened
    /// without blocking and checked to be a regular file before it is read.
    public static func read(_ path: String, limit: Int = 4 << 20) throws(FileError) -> [UInt8]? {
        let file: FileDescriptor
        do throws(Errno) {
            file = try FileDescriptor.openForReading(path, followingSymbolicLinks: true)
        } catch {
            if error == .noSuchFileOrDirectory { return nil }
            throw FileError(operation: "open", path: path, errno: error)
        }
        defer { file.close() }
        return try readRegularFile(file, path: path, limit: limit)
    }

    /// Reads an open file that must be a regular file of at most `limit` bytes (checked with `fstat` first).
    public static func readRegularFile(_ file: FileDescriptor, path: String, limit: Int) throws(FileError) -> [UInt8] {
        let status: FileStatus
        do throws(Errno) {
            status = try file.status()
        } catch {
            throw FileError(operation: "fstat", path: path, errno: error)
        }
        guard status.kind == .regular else {
            throw FileError(path: path, reason: "not a regular file (\(status.kind))")
        }
        let tooLarge = FileError(path: path, reason: "larger than \(Self.describe(bytes: limit))")
        guard status.size <= limit else { throw tooLarge }
        let bytes: [UInt8]?
        do throws(Errno) {
            bytes = try file.readToEnd(limit: limit)
        } catch {
            throw FileError(operation: "read", path: path, errno: error)
        }
        guard let bytes else { throw tooLarge }
        return bytes
    }

    /// Moves a bad file aside to `name.corrupt-<unix time>`; returns the new name.
    public static func moveAside(_ name: String, in directory: DirectoryDescriptor) throws(FileError) -> String {
        let aside = "\(name).corrupt-\(time(nil))"
        do throws(Errno) {
            try directory.rename(name, to: aside)
        } catch {
            throw FileError(operation: "rename", path: directory.pathOf(name), errno: error)
        }
        return aside
    }

    /// "4 MiB", or "1000 bytes" below a mebibyte.
    static func describe(bytes: Int) -> String {
        bytes >= 1 << 20 && bytes % (1 << 20) == 0 ? "\(bytes >> 20) MiB" : "\(bytes) bytes"
    }

    private static func randomHex() -> String {
        let digits = String(UInt64.random(in: .min ... .max), radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}

/// Wall-clock seconds since the epoch.
public func wallClockSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}
