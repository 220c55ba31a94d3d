import CAccmonShims
import Glibc

/// What `fstat(2)` says of an open file: its type, permission bits, owner and size.
public struct FileStatus: Sendable, Hashable {
    /// The type of a file (`st_mode & S_IFMT`).
    public enum Kind: Sendable, Hashable, CustomStringConvertible {
        case regular, directory, fifo, characterDevice, blockDevice, socket, symbolicLink, unknown

        init(mode: mode_t) {
            switch mode & S_IFMT {
            case S_IFREG: self = .regular
            case S_IFDIR: self = .directory
            case S_IFIFO: self = .fifo
            case S_IFCHR: self = .characterDevice
            case S_IFBLK: self = .blockDevice
            case S_IFSOCK: self = .socket
            case S_IFLNK: self = .symbolicLink
            default: self = .unknown
            }
        }

        /// The type with its article, for messages: "a FIFO", "a directory".
        public var description: String {
            switch self {
            case .regular: "a regular file"
            case .directory: "a directory"
            case .fifo: "a FIFO"
            case .characterDevice: "a character device"
            case .blockDevice: "a block device"
            case .socket: "a socket"
            case .symbolicLink: "a symbolic link"
            case .unknown: "a file of unknown type"
            }
        }
    }

    public var kind: Kind
    /// The permission bits, set-id and sticky bits included (`st_mode & 07777`).
    public var permissions: mode_t
    /// The owner's uid.
    public var owner: uid_t
    /// The size in bytes.
    public var size: Int
    /// The owning group's gid.
    public var group: gid_t = 0
    /// The file system the file is on (`st_dev`) and its inode there (`st_ino`): together, which file it is.
    public var fileSystem: UInt64 = 0
    public var inode: UInt64 = 0
    /// The device a character or block device node stands for (`st_rdev`); 0 for other files.
    public var deviceNumber: UInt64 = 0

    public init(
        kind: Kind, permissions: mode_t, owner: uid_t, size: Int, group: gid_t = 0, fileSystem: UInt64 = 0,
        inode: UInt64 = 0, deviceNumber: UInt64 = 0
    ) {
        self.kind = kind
        self.permissions = permissions
        self.owner = owner
        self.size = size
        self.group = group
        self.fileSystem = fileSystem
        self.inode = inode
        self.deviceNumber = deviceNumber
    }

    /// Whether the group or others may write (`S_IWGRP`, `S_IWOTH`).
    public var isWritableByGroupOrOthers: Bool { permissions & (S_IWGRP | S_IWOTH) != 0 }

    /// The permission bits as `ls -l`'s octal: "0755".
    public var octalPermissions: String {
        let digits = String(permissions, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

extension FileStatus {
    /// The status `stat(2)` filled in.
    init(_ info: stat) {
        self.init(
            kind: Kind(mode: info.st_mode), permissions: info.st_mode & 0o7777, owner: info.st_uid,
            size: Int(info.st_size), group: info.st_gid, fileSystem: UInt64(info.st_dev), inode: UInt64(info.st_ino),
            deviceNumber: UInt64(info.st_rdev))
    }

    /// The major number of ``deviceNumber`` (glibc's `gnu_dev_major`).
    public var deviceMajor: UInt32 {
        UInt32(truncatingIfNeeded: ((deviceNumber >> 8) & 0xFFF) | ((deviceNumber >> 32) & ~0xFFF))
    }
    /// The minor number of ``deviceNumber`` (glibc's `gnu_dev_minor`).
    public var deviceMinor: UInt32 {
        UInt32(truncatingIfNeeded: (deviceNumber & 0xFF) | ((deviceNumber >> 12) & ~0xFF))
    }

    /// Whether both are the same file: the same inode of the same file system.
    public func isSameFile(as other: FileStatus) -> Bool { fileSystem == other.fileSystem && inode == other.inode }
}

extension FileDescriptor {
    /// The open file's status (`fstat(2)`).
    public func status() throws(Errno) -> FileStatus {
        var info = stat()
        _ = try valueOrErrno { fstat(rawValue, &info) }
        return FileStatus(info)
    }

    /// Flushes the file's data and metadata to disk (`fsync(2)`).
    public func synchronize() throws(Errno) {
        _ = try valueOrErrno { fsync(rawValue) }
    }

    /// Reads to the end of the file, at most `limit` bytes; `nil` when there are more. For regular files: on a
    /// non-blocking descriptor of another kind it stops at the first `EAGAIN` (thrown).
    public func readToEnd(limit: Int) throws(Errno) -> [UInt8]? {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = try valueOrErrno {
                chunk.withUnsafeMutableBytes { Glibc.read(rawValue, $0.baseAddress, $0.count) }
            }
            if count == 0 { return bytes }
            bytes += chunk[..<count]
            if bytes.count > limit { return nil }
        }
    }
}

/// The identity of the file `name` names relative to `directory`, a final link followed (`statx` with
/// `AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT`): type, file system, inode and device number, from what the kernel has
/// cached, never asking a network file system for fresh attributes nor triggering an automount. Permission bits,
/// owner and size are left 0. A FUSE file system is still asked (its attributes are not cached for long): look only
/// at files on file systems known not to be one.
public func identityWithoutSync(_ name: String, in directory: FileDescriptor) throws(Errno) -> FileStatus {
    var identity = CAccmonShims_FileIdentity()
    _ = try valueOrErrno { CAccmonShims_identityWithoutSync(directory.rawValue, name, &identity) }
    return FileStatus(
        kind: .init(mode: mode_t(identity.mode)), permissions: 0, owner: 0, size: 0, fileSystem: identity.fileSystem,
        inode: identity.inode, deviceNumber: identity.deviceNumber)
}
