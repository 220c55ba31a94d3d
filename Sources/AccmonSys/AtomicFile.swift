import Glibc

/// An error reading or writing a file: the operation, the path and errno.
public struct FileError: Error, Sendable, CustomStringConvertible {
    /// The system call, such as `rename`.
    public var operation: String
    /// The file.
    public var path: String
    /// The system error.
    public var errno: Errno

    public var description: String { "\(operation): '\(path)': \(errno)" }
}

/// Small whole-file operations for the state store.
public enum AtomicFile {
    /// Replaces `path` with `bytes` so that a crash leaves the old or the new content, never a mix: writes a
    /// temporary file beside it, fsyncs it, renames it over `path`, then fsyncs the directory.
    public static func write(_ bytes: [UInt8], to path: String, mode: mode_t = 0o600) throws(FileError) {
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard fd >= 0 else { throw FileError(operation: "open", path: temporary, errno: .current) }
        do throws(Errno) {
            try FileDescriptor(rawValue: fd).writeAll(bytes)
            guard fsync(fd) == 0 else { throw Errno.current }
        } catch {
            Glibc.close(fd)
            unlink(temporary)
            throw FileError(operation: "write", path: temporary, errno: error)
        }
        Glibc.close(fd)
        guard rename(temporary, path) == 0 else {
            let error = Errno.current
            unlink(temporary)
            throw FileError(operation: "rename", path: path, errno: error)
        }
        let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let directoryFD = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryFD >= 0 else { throw FileError(operation: "open", path: directory, errno: .current) }
        defer { Glibc.close(directoryFD) }
        guard fsync(directoryFD) == 0 else { throw FileError(operation: "fsync", path: directory, errno: .current) }
    }

    /// Reads the whole file; `nil` when it does not exist.
    public static func read(_ path: String) throws(FileError) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw FileError(operation: "open", path: path, errno: .current)
        }
        defer { Glibc.close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw FileError(operation: "read", path: path, errno: .current)
            }
            if count == 0 { return bytes }
            bytes += chunk[0..<count]
        }
    }

    /// Moves a bad file aside to `path.corrupt-<unix time>`; returns the new name.
    public static func moveAside(_ path: String) throws(FileError) -> String {
        let aside = "\(path).corrupt-\(time(nil))"
        guard rename(path, aside) == 0 else { throw FileError(operation: "rename", path: path, errno: .current) }
        return aside
    }

    /// Creates `path` as a directory (mode 0700) if it does not exist.
    public static func ensureDirectory(_ path: String) throws(FileError) {
        if mkdir(path, 0o700) != 0 && errno != EEXIST {
            throw FileError(operation: "mkdir", path: path, errno: .current)
        }
    }
}

/// Wall-clock seconds since the epoch.
public func wallClockSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}
