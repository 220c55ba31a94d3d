import AccmonSys
import Glibc

extension NodeKeeper {
    /// Cuts the descriptors open on a held node, where Linux can:
    /// - simulated nodes: a terminal (a pty the test made with `mknod`) is hung up (`TIOCVHANGUP`, which needs
    ///   `CAP_SYS_ADMIN`); a regular file or another character device is not cut;
    /// - real devices: the USB device the node belongs to (a serial port, usbfs, hidraw) is de-authorized and
    ///   authorized again through sysfs, which removes every node of it, failing their descriptors with `ENODEV`,
    ///   and brings them back as new nodes (a re-enumeration); a node off USB (a Bluetooth HID input node) is not
    ///   cut: evdev's `EVIOCREVOKE` revokes only the descriptor it is called on.
    public func cut(_ path: String) throws(NodeError) -> CutOutcome {
        guard let record = try heldRecord(path, "cut") else {
            throw NodeError(.notHeld, "cut", path, "not held: only a held node's descriptors are cut")
        }
        let node = try open(record.path, "cut", checkingDevice: false)
        defer { node.close() }
        guard record.isSameFile(as: node.status) else {
            throw NodeError(.missing, "cut", path, "the held node is gone (another node is there now)")
        }
        func notCut(_ reason: String) -> CutOutcome { CutOutcome(path: path, method: .notCut, reason: reason) }
        if isDevicePolicy {
            guard let usbDevice = record.device?.usbDevice else {
                return notCut(
                    "not a USB device's node (\(record.device?.kind ?? "unknown kind")): Linux revokes no other "
                        + "process's descriptor of it (evdev's EVIOCREVOKE revokes only the caller's)")
            }
            for value in ["0", "1"] {
                do throws(Errno) {
                    try writeAttribute(value, "authorized", of: usbDevice)
                } catch {
                    throw NodeError(.failed, "cut", path, "write \(value) to \(usbDevice)/authorized: \(error)")
                }
            }
            return CutOutcome(path: path, method: .reauthorized, usbDevice: usbDevice)
        }
        guard node.status.kind == .characterDevice else {
            return notCut("a regular file: Linux cannot revoke the descriptors of a regular file")
        }
        let terminal: FileDescriptor
        do throws(Errno) {
            terminal = try node.descriptor.reopen(O_RDWR)
        } catch {
            throw NodeError(.failed, "cut", path, "open: \(error)")
        }
        defer { terminal.close() }
        guard terminal.isTerminal else {
            return notCut("a character device that is not a terminal: only terminals are hung up here")
        }
        do throws(Errno) {
            try terminal.hangUpTerminal()
        } catch {
            let code: NodeError.Code = error.rawValue == EPERM ? .notPermitted : .failed
            throw NodeError(code, "cut", path, "TIOCVHANGUP: \(error)")
        }
        return CutOutcome(path: path, method: .hungUp)
    }

    // MARK: - Port marks

    public func markPort(_ port: String) throws(NodeError) {
        try checkPort(port, "mark-port")
        do throws(Errno) {
            try portsDirectory.createNew(port, mode: 0o644).close()
        } catch  where error.rawValue == EEXIST {
            // Marked already.
        } catch {
            throw NodeError(.failed, "mark-port", port, "cannot create \(portsDirectory.pathOf(port)): \(error)")
        }
    }

    @discardableResult
    public func unmarkPort(_ port: String) throws(NodeError) -> [String] {
        try checkPort(port, "unmark-port")
        do throws(Errno) {
            try portsDirectory.remove(port)
        } catch  where error.rawValue == ENOENT {
            // Not marked.
        } catch {
            throw NodeError(.failed, "unmark-port", port, "cannot remove \(portsDirectory.pathOf(port)): \(error)")
        }
        let due = pendingUdevChanges.filter { $0.port == port }
        guard !due.isEmpty else { return [] }
        pendingUdevChanges.removeAll { $0.port == port }
        try persist("unmark-port", port)
        return due.compactMap { triggerChange($0.syspath) ? $0.syspath : nil }
    }

    /// The marked ports.
    func markedPorts() -> [String] {
        ((try? portsDirectory.names(limit: 10_000).names) ?? []).filter(isUSBPortPath).sorted()  // try?: none listed
    }

    private func checkPort(_ port: String, _ context: String) throws(NodeError) {
        guard isUSBPortPath(port) else {
            throw NodeError(.badRequest, context, port, "not a USB port path such as 1-1.2")
        }
    }

    /// After restoring a node that appeared on a claimed port (found root-only, as the shipped rule made it):
    /// asks udev to set it up again (`change`), now when its port is no longer marked, or when it is unmarked.
    func askUdevAgain(_ device: NodeDevice) -> ReleaseOutcome.UdevChange {
        if let port = device.port, markedPorts().contains(port) {
            pendingUdevChanges.append(PendingUdevChange(port: port, syspath: device.syspath))
            return .afterUnmark
        }
        return triggerChange(device.syspath) ? .triggered : .none
    }

    /// Writes `change` to the device's `uevent` attribute: udev runs its rules for it again.
    private func triggerChange(_ syspath: String) -> Bool {
        do throws(Errno) {
            try writeAttribute("change", "uevent", of: syspath)
            return true
        } catch {
            warnings.append("udev change: \(syspath)/uevent: \(error)")
            return false
        }
    }

    // MARK: - Openers

    public func openers(of path: String) throws(NodeError) -> [NodeOpener] {
        let node = try open(path, "openers")
        defer { node.close() }
        return ProcessScan.openers(of: node.status)
    }

    /// The openers of each of `paths`, in one pass over `/proc`; a node that cannot be opened has none.
    public func openers(ofEach paths: [String]) -> [[NodeOpener]] {
        var files: [FileStatus] = []
        var indices: [Int?] = []
        for path in paths {
            guard let node = try? open(path, "openers") else {  // try?: a node gone or refused has none to name
                indices.append(nil)
                continue
            }
            indices.append(files.count)
            files.append(node.status)
            node.close()
        }
        let found = ProcessScan.openers(ofEach: files)
        return indices.map { $0.map { found[$0] } ?? [] }
    }
}
