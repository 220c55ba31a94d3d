import AccmonSys
import Glibc

extension NodeKeeper {
    public func unclaimedState(of path: String) throws(NodeError) -> NodeState {
        if let record = try heldRecord(path, "state") { return record.original }
        let node = try open(path, "state")
        defer { node.close() }
        return try state(of: node, "state", path)
    }

    /// Opens a held node for I/O through its `O_PATH` descriptor (`/proc/self/fd/N`: the inode the record names, not
    /// whatever is at the path by now). The keeper needs no privilege for it: while held, a node is root's with the
    /// owner's read and write, and the helper runs as root.
    public func openForIO(_ path: String, readOnly: Bool) throws(NodeError) -> FileDescriptor {
        guard let record = try heldRecord(path, "open") else {
            throw NodeError(.notHeld, "open", path, "not held: only a claimed node is opened")
        }
        let node = try open(record.path, "open", checkingDevice: false)
        defer { node.close() }
        guard record.isSameFile(as: node.status) else {
            throw NodeError(.missing, "open", path, "the held node is gone (another node is there now)")
        }
        do throws(Errno) {
            return try node.descriptor.reopen((readOnly ? O_RDONLY : O_RDWR) | O_NOCTTY | O_NONBLOCK | O_CLOEXEC)
        } catch {
            let code: NodeError.Code =
                error.rawValue == EACCES || error.rawValue == EPERM
                ? .notPermitted : error.rawValue == ENXIO || error.rawValue == ENODEV ? .missing : .failed
            throw NodeError(code, "open", path, "\(readOnly ? "O_RDONLY" : "O_RDWR"): \(error)")
        }
    }
}
