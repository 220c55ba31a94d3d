import AccmonSys
import Glibc

/// Holds device nodes for claims by changing their owner, mode and ACL, and restores them exactly.
///
/// Every operation opens the node afresh under the keeper's ``NodePolicy`` (`openat2` below its directory, no
/// symbolic link, `O_PATH | O_NOFOLLOW`), checks the descriptor's `fstat`, and changes only that inode through the
/// descriptor. A record per held node (path, inode, holder, the state to restore, the state applied) is written to
/// the record file before the node is changed, so a restarted keeper (the helper after a crash, accmond after one,
/// `accmon-nodes --restore-all` at package removal) restores exactly.
///
/// - Important: not thread-safe, and its calls block on the file system and `/proc`: one thread of its own.
public final class NodeKeeper: NodeControl {
    /// At most this many nodes are held at once.
    public static let maximumHeldNodes = 4096

    let policy: NodePolicy
    /// The policy's directory, opened once.
    let root: PathDescriptor
    let stateDirectory: DirectoryDescriptor
    let portsDirectory: DirectoryDescriptor
    let recordName: String
    let attributeWriter: (_ path: String, _ value: String) throws(Errno) -> Void
    /// Who names the processes that have a node open.
    let openerScanner: any OpenerScanner
    var records: [NodeKey: NodeRecord] = [:]
    /// The changes of held nodes' attributes, when watched; the watch of each held node.
    let inodeWatch: InodeWatch?
    var watches: [NodeKey: Int32] = [:]
    var pendingUdevChanges: [PendingUdevChange] = []
    /// Problems met at start that did not stop it (a record file that could not be read, moved aside).
    public internal(set) var warnings: [String] = []
    /// How long a cut by re-authorization waits for the device's held nodes to be there again.
    public var reenumerationWait: Duration = .seconds(5)
    /// How long a cut of a USB device's own node keeps its hub port off.
    public var portPowerOffMilliseconds = 200

    /// Opens the policy's directory and the state directory (`ports/` below it holds the port marks), and reads
    /// the records kept there.
    ///
    /// - Parameters:
    ///   - stateDirectory: created (0755) when missing; refused when another user owns it or others may write in
    ///     it, as the records and marks it holds decide what is restored.
    ///   - watchingChanges: watch the held nodes' attributes (inotify), so that a rewrite by udev or logind is seen
    ///     at once: ``changeDescriptor`` turns readable, and ``reapplyChanged()`` applies the claims again.
    ///   - attributeWriter: writes a sysfs attribute (tests record what would be written).
    ///   - openerScanner: finds the processes that have a node open (the helper's is the scanner unit).
    /// - Throws: ``NodeError`` when a directory cannot be opened or is unfit. A record file that cannot be read is
    ///   moved aside (`nodes.json.corrupt-TIME`) with a warning (``warnings``), not an error: the keeper must start.
    public init(
        policy: NodePolicy, stateDirectory: String, recordName: String = "nodes.json", watchingChanges: Bool = false,
        attributeWriter: @escaping (_ path: String, _ value: String) throws(Errno) -> Void = writeAttributeFile,
        openerScanner: any OpenerScanner = LocalOpenerScanner()
    ) throws(NodeError) {
        self.policy = policy
        self.recordName = recordName
        self.attributeWriter = attributeWriter
        self.openerScanner = openerScanner
        do throws(Errno) {
            root = try PathDescriptor.openDirectory(policy.directory)
        } catch {
            throw NodeError(.failed, "nodes", policy.directory, "cannot open the directory: \(error)")
        }
        let directories: (state: DirectoryDescriptor, ports: DirectoryDescriptor)
        do throws(NodeError) {
            let state = try Self.openOwnDirectory(stateDirectory)
            do throws(NodeError) {
                directories = (state, try Self.openOwnDirectory(state.pathOf("ports")))
            } catch {
                state.close()
                throw error
            }
        } catch {
            root.close()
            throw error
        }
        if !PathDescriptor.hasOpenat2(root) {
            warnings.append(
                "nodes: openat2 is not available (ENOSYS: a kernel before 5.6, or a seccomp filter without it): nodes "
                    + "are resolved one component at a time, each opened O_PATH | O_NOFOLLOW and checked")
        }
        self.stateDirectory = directories.state
        portsDirectory = directories.ports
        var inodeWatch: InodeWatch?
        if watchingChanges {
            do throws(Errno) {
                inodeWatch = try InodeWatch()
            } catch {
                warnings.append("nodes: inotify: \(error): rewrites are seen only when a node is held again")
            }
        }
        self.inodeWatch = inodeWatch
        do throws(NodeError) {
            let file = try NodeRecordFile.read(recordName, in: self.stateDirectory)
            records = Dictionary(file.nodes.map { ($0.key, $0) }, uniquingKeysWith: { $1 })
            pendingUdevChanges = file.pendingUdevChanges
        } catch {
            let aside = try? AtomicFile.moveAside(recordName, in: self.stateDirectory)  // try?: reported below
            warnings.append("\(error); moved aside to \(aside ?? "nowhere (the move failed)"); nothing held is known")
        }
        for record in records.values.sorted(by: { $0.path < $1.path }) {
            // try?: a node gone since is dropped at the next hold or held
            guard let node = try? open(record.path, "watch", checkingDevice: false) else { continue }
            if record.isSameFile(as: node.status) { watch(node, record.key) }
            node.close()
        }
    }

    deinit {
        inodeWatch?.close()
        root.close()
        stateDirectory.close()
        portsDirectory.close()
    }

    private static func openOwnDirectory(_ path: String) throws(NodeError) -> DirectoryDescriptor {
        let directory: DirectoryDescriptor
        let status: FileStatus
        do throws(Errno) {
            try DirectoryDescriptor.create(path, mode: 0o755)
            directory = try DirectoryDescriptor.open(path)
        } catch {
            throw NodeError(.failed, "nodes", path, "cannot open the state directory: \(error)")
        }
        do throws(Errno) {
            status = try directory.status()
        } catch {
            directory.close()
            throw NodeError(.failed, "nodes", path, "fstat: \(error)")
        }
        guard status.owner == geteuid(), !status.isWritableByGroupOrOthers else {
            directory.close()
            throw NodeError(
                .refused, "nodes", path,
                "owned by uid \(status.owner), mode \(status.octalPermissions): must be this user's (uid "
                    + "\(geteuid())) and writable by it alone")
        }
        return directory
    }

    /// Writes the records. Called after every change to them, before the node is changed when holding.
    func persist(_ context: String, _ path: String) throws(NodeError) {
        let file = NodeRecordFile(
            nodes: records.values.sorted { $0.path < $1.path }, pendingUdevChanges: pendingUdevChanges)
        do throws(NodeError) {
            try file.write(recordName, in: stateDirectory)
        } catch {
            throw NodeError(.failed, context, path, "cannot write the records: \(error)")
        }
    }

    // MARK: - NodeControl

    public func hold(_ path: String, holder: NodeHolder) throws(NodeError) -> HoldOutcome {
        var node = try open(path, "hold")
        defer { node.close() }
        let current = try state(of: node, "hold", path)
        let key = NodeKey(node.status)
        // The same node held already (by this name or another), and the node held before under this name if it is
        // another inode now (re-enumerated: gone).
        let earlier = records[key].flatMap { $0.isSameFile(as: node.status) ? $0 : nil }
        let replaced = records.values.first { $0.path == path && $0.key != key }
        var record: NodeRecord
        var change: HoldOutcome.Change
        if var existing = earlier {
            if current != existing.applied {
                existing.original = existing.original.adopting(rewrite: current, of: existing.applied)
                change = .rewriteAdopted
            } else {
                change = existing.holder == holder ? .unchanged : .reapplied
            }
            existing.holder = holder
            existing.applied = existing.original.enforced(holder: holder)
            existing.restoresThroughUdev = existing.restoresThroughUdev || node.device?.onClaimedPort == true
            existing.device = node.device ?? existing.device
            record = existing
        } else {
            guard records.count - (replaced == nil ? 0 : 1) < Self.maximumHeldNodes else {
                throw NodeError(.tooMany, "hold", path, "\(Self.maximumHeldNodes) nodes are held already")
            }
            if let replaced { forget(replaced.key) }  // another inode: the node held before is gone
            if records[key] != nil { forget(key) }  // an inode number reused by another device: its node is gone
            record = NodeRecord(
                path: path, fileSystem: node.status.fileSystem, inode: node.status.inode,
                deviceNumber: node.status.deviceNumber, holder: holder, original: current,
                applied: current.enforced(holder: holder), restoresThroughUdev: node.device?.onClaimedPort == true,
                device: node.device)
            change = .applied
        }
        records[key] = record
        try persist("hold", path)
        if current != record.applied {
            do throws(NodeError) {
                do throws(NodeError) {
                    try apply(record.applied, to: &node, "hold", path)
                } catch  where error.code == .noACLs && !isDevicePolicy {
                    record.applied = record.original.enforcedWithoutACL(holder: holder)
                    records[key] = record
                    try persist("hold", path)
                    try apply(record.applied, to: &node, "hold", path)
                }
            } catch {
                // Leave the node as it was before this call and held as it was (or not held).
                try? apply(current, to: &node, "hold", path)  // try?: the first failure is the one to report
                records[key] = earlier
                try? persist("hold", path)  // try?: the first failure is the one to report
                throw error
            }
        }
        watch(node, key)
        dropGoneRecords(except: key)
        return HoldOutcome(
            path: record.path, change: change, original: record.original, applied: record.applied,
            replacedNode: replaced != nil && change == .applied, restoresThroughUdev: record.restoresThroughUdev)
    }

    public func release(_ path: String) throws(NodeError) -> ReleaseOutcome {
        guard var record = try heldRecord(path, "release") else {
            throw NodeError(.notHeld, "release", path, "not held")
        }
        let gone = ReleaseOutcome(path: path, result: .gone, restored: nil, rewriteAdopted: false, udevChange: .none)
        var node: OpenedNode
        do throws(NodeError) {
            node = try open(record.path, "release", checkingDevice: false)
        } catch  where error.code == .missing || error.code == .refused {
            // Nothing, or something else (a link, another type of file), is at the path: the held node is gone.
            forget(record.key)
            try persist("release", path)
            return gone
        }
        defer { node.close() }
        guard record.isSameFile(as: node.status) else {
            forget(record.key)
            try persist("release", path)
            return gone
        }
        let current = try state(of: node, "release", path)
        let rewritten = current != record.applied
        if rewritten {
            record.original = record.original.adopting(rewrite: current, of: record.applied)
            records[record.key] = record
            try persist("release", path)
        }
        if current != record.original { try apply(record.original, to: &node, "release", path) }
        forget(record.key)
        var udevChange = ReleaseOutcome.UdevChange.none
        if record.restoresThroughUdev, let device = record.device {
            udevChange = askUdevAgain(device)
        }
        try persist("release", path)
        return ReleaseOutcome(
            path: path, result: .restored, restored: record.original, rewriteAdopted: rewritten, udevChange: udevChange)
    }

    public func releaseAll() -> [ReleaseResult] {
        records.values.map(\.path).sorted().map { path in
            do throws(NodeError) {
                return ReleaseResult(path: path, outcome: try release(path), error: nil)
            } catch {
                return ReleaseResult(path: path, outcome: nil, error: error)
            }
        }
    }

    public func held() -> HeldState {
        dropGoneRecords(except: nil)
        return HeldState(nodes: records.values.sorted { $0.path < $1.path }.map(\.held), ports: markedPorts())
    }

    /// The record of the node held under `path`, or of the node `path` names if it is held under another name;
    /// `nil` when neither is held.
    func heldRecord(_ path: String, _ context: String) throws(NodeError) -> NodeRecord? {
        if let named = records.values.first(where: { $0.path == path }) { return named }
        let node: OpenedNode
        do throws(NodeError) {
            node = try open(path, context, checkingDevice: false)
        } catch  where error.code == .missing {
            return nil
        }
        defer { node.close() }
        return records[NodeKey(node.status)].flatMap { $0.isSameFile(as: node.status) ? $0 : nil }
    }

    /// Forgets the records of nodes that are gone or are another inode now (re-enumerated): udev set the new node
    /// up, and there is nothing to restore.
    func dropGoneRecords(except kept: NodeKey?) {
        var dropped = false
        for (key, record) in records where key != kept {
            let node: OpenedNode
            do throws(NodeError) {
                node = try open(record.path, "held", checkingDevice: false)
            } catch {
                if error.code == .missing || error.code == .refused {
                    forget(key)
                    dropped = true
                }
                continue
            }
            if !record.isSameFile(as: node.status) {
                forget(key)
                dropped = true
            }
            node.close()
        }
        if dropped { try? persist("held", kept.flatMap { records[$0]?.path } ?? "") }  // try?: the next change writes
    }
}
