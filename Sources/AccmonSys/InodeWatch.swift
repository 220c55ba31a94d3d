import Glibc

/// An inotify instance that reports changes of the attributes of files (owner, mode, extended attributes:
/// `IN_ATTRIB`), by inode: a watch added through `/proc/self/fd/N` follows the inode, whatever its name.
public struct InodeWatch: Sendable {
    /// Readable when a change is pending (non-blocking).
    public let descriptor: FileDescriptor

    public init() throws(Errno) {
        descriptor = FileDescriptor(rawValue: try valueOrErrno { inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC)) })
    }

    /// Watches the attributes of the file at `path`; returns the watch (the same one for the same inode).
    public func watchAttributes(of path: String) throws(Errno) -> Int32 {
        try valueOrErrno { inotify_add_watch(descriptor.rawValue, path, UInt32(IN_ATTRIB)) }
    }

    /// Stops a watch (one whose file is gone has ended already: nothing to do).
    public func remove(_ watch: Int32) {
        _ = inotify_rm_watch(descriptor.rawValue, watch)
    }

    /// Reads every pending event; returns whether there was one.
    @discardableResult
    public func drain() -> Bool {
        var any = false
        var buffer = [UInt8](repeating: 0, count: 4096)
        while buffer.withUnsafeMutableBytes({ Glibc.read(descriptor.rawValue, $0.baseAddress, $0.count) }) > 0 {
            any = true
        }
        return any
    }

    public func close() { descriptor.close() }
}
