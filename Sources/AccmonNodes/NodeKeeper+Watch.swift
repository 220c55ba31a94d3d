import AccmonSys

extension NodeKeeper {
    /// Readable when a held node's owner, mode or ACL changed (with `watchingChanges`); then call
    /// ``reapplyChanged()``. `nil` without watching.
    public var changeDescriptor: FileDescriptor? { inodeWatch?.descriptor }

    /// Applies the claims again on every held node found changed since they were applied (udev, logind), each as
    /// ``hold(_:holder:)`` does for its holder: the rewrite becomes what release restores. Clears
    /// ``changeDescriptor``'s readiness.
    ///
    /// - Returns: what was done for each changed node, in path order: its outcome or its error.
    public func reapplyChanged() -> [(path: String, result: Result<HoldOutcome, NodeError>)] {
        inodeWatch?.drain()
        var results: [(path: String, result: Result<HoldOutcome, NodeError>)] = []
        for record in records.values.sorted(by: { $0.path < $1.path }) {
            let path = record.path
            guard let node = try? open(path, "watch", checkingDevice: false) else { continue }  // try?: gone
            let changed = record.isSameFile(as: node.status) && (try? state(of: node, "watch", path)) != record.applied
            node.close()
            guard changed else { continue }
            do throws(NodeError) {
                results.append((path, .success(try hold(path, holder: record.holder))))
            } catch {
                results.append((path, .failure(error)))
            }
        }
        return results
    }

    /// Watches the attributes of a node just held (through its descriptor, so the inode and not the name).
    func watch(_ node: OpenedNode, _ key: NodeKey) {
        guard let inodeWatch, watches[key] == nil else { return }
        if let watch = try? inodeWatch.watchAttributes(of: node.descriptor.procPath) {  // try?: unwatched, still held
            watches[key] = watch
        }
    }

    /// The warnings gathered since the last call (``warnings``), cleared.
    public func takeWarnings() -> [String] {
        defer { warnings = [] }
        return warnings
    }

    /// Forgets a node: its record and its watch.
    func forget(_ key: NodeKey) {
        records[key] = nil
        if let watch = watches.removeValue(forKey: key) { inodeWatch?.remove(watch) }
    }
}
