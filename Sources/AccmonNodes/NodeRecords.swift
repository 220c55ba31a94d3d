import AccmonSys
import FoundationEssentials

/// What a ``NodeKeeper`` keeps of one held node: which inode it is, who holds it, the state to restore and the
/// state applied.
struct NodeRecord: Sendable, Hashable, Codable {
    var path: String
    /// `st_dev` and `st_ino`: the node held, not another one made at the same path since.
    var fileSystem: UInt64
    var inode: UInt64
    /// `st_rdev`, for a device node.
    var deviceNumber: UInt64
    var holder: NodeHolder
    var original: NodeState
    var applied: NodeState
    var restoresThroughUdev: Bool
    var device: NodeDevice?

    func isSameFile(as status: FileStatus) -> Bool {
        fileSystem == status.fileSystem && inode == status.inode && deviceNumber == status.deviceNumber
    }

    var key: NodeKey { NodeKey(fileSystem: fileSystem, inode: inode) }

    var held: HeldNode {
        HeldNode(
            path: path, holder: holder, original: original, applied: applied,
            restoresThroughUdev: restoresThroughUdev, device: device?.syspath, port: device?.port)
    }
}

/// What a record is kept by: the node's file system and inode, whichever name reached it. Two names of one node (a
/// hard link, or a string the kernel reads differently from Swift) are one record, never two that each restore.
struct NodeKey: Hashable {
    var fileSystem: UInt64
    var inode: UInt64

    init(fileSystem: UInt64, inode: UInt64) {
        self.fileSystem = fileSystem
        self.inode = inode
    }

    init(_ status: FileStatus) { self.init(fileSystem: status.fileSystem, inode: status.inode) }
}

/// A device to ask udev to set up again (`change`) once its port is unmarked.
struct PendingUdevChange: Sendable, Hashable, Codable {
    var port: String
    var syspath: String
}

/// The record file (`nodes.json` in the keeper's state directory): every held node, and the pending udev changes.
/// Written by atomic replacement (a new file created `O_EXCL | O_NOFOLLOW`, fsynced, renamed over the old one), so a
/// crash leaves the old or the new records, and a link planted in the directory is never followed.
struct NodeRecordFile: Sendable, Codable {
    static let currentVersion = 1
    static let sizeLimit = 32 << 20

    var version = currentVersion
    var nodes: [NodeRecord] = []
    var pendingUdevChanges: [PendingUdevChange] = []

    /// Reads the record file `name` of `directory`; an empty one when there is none.
    static func read(_ name: String, in directory: DirectoryDescriptor) throws(NodeError) -> NodeRecordFile {
        let path = directory.pathOf(name)
        let bytes: [UInt8]?
        do throws(FileError) {
            bytes = try AtomicFile.read(name, in: directory, limit: sizeLimit)
        } catch {
            throw NodeError(.failed, "records", path, error.reason)
        }
        guard let bytes else { return NodeRecordFile() }
        let file: NodeRecordFile
        do {
            file = try JSONDecoder().decode(NodeRecordFile.self, from: Data(bytes))
        } catch {
            throw NodeError(.failed, "records", path, "not a record file: \(error)")
        }
        guard file.version == currentVersion else {
            throw NodeError(.failed, "records", path, "version \(file.version), not \(currentVersion)")
        }
        return file
    }

    /// Replaces the record file `name` of `directory` with this.
    func write(_ name: String, in directory: DirectoryDescriptor) throws(NodeError) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let bytes: Data
        do {
            bytes = try encoder.encode(self)
        } catch {
            throw NodeError(.failed, "records", directory.pathOf(name), "cannot encode: \(error)")
        }
        do throws(FileError) {
            try AtomicFile.write(Array(bytes), to: name, in: directory, mode: 0o600)
        } catch {
            throw NodeError(.failed, "records", directory.pathOf(name), "\(error)")
        }
    }
}
