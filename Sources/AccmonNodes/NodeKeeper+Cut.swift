import AccmonSys
import Glibc

extension NodeKeeper {
    /// The kinds whose nodes a cut may reach through their USB device: a USB device itself (usbfs) and a USB serial
    /// port. A `bluetooth-hid` node's nearest USB device is the Bluetooth adapter, shared by every Bluetooth device.
    public static let cuttableKinds: Set<String> = ["usb", "serial"]

    /// Cuts the descriptors open on a held node, where Linux can:
    /// - simulated nodes: a terminal (a pty the test made with `mknod`) is hung up (`TIOCVHANGUP`, which needs
    ///   `CAP_SYS_ADMIN`); a regular file or another character device is not cut;
    /// - a USB serial port: its USB device is de-authorized and authorized again through sysfs, which unbinds its
    ///   interfaces' drivers (hanging up the tty for every descriptor) and binds them again as new nodes; the keeper
    ///   waits for the device's held nodes to be there again (a new inode at each path), and for udev to finish, so
    ///   that the next request (a waiter's hold) meets them as udev set them up;
    /// - a USB device's own node (usbfs): its hub port is disabled and enabled again, which disconnects the device
    ///   (a usbfs descriptor survives re-authorization, which only unconfigures it, but not a disconnection) and
    ///   brings it back as a new device; only where the hub switches the port's power (``NodeDevice/hubPort``);
    /// - nothing else: a Bluetooth HID input node (evdev's `EVIOCREVOKE` revokes only the caller's descriptor, and
    ///   its USB device is the Bluetooth adapter), a node off USB, and any node of a USB device another user holds
    ///   a node of (re-authorizing or disconnecting it hangs up all its nodes: other users' claims are not cut for
    ///   this one's).
    public func cut(_ path: String) throws(NodeError) -> CutOutcome {
        guard let record = try heldRecord(path, "cut") else {
            throw NodeError(.notHeld, "cut", path, "not held: only a held node's descriptors are cut")
        }
        let node = try open(record.path, "cut", checkingDevice: false)
        defer { node.close() }
        guard record.isSameFile(as: node.status) else {
            throw NodeError(.missing, "cut", path, "the held node is gone (another node is there now)")
        }
        if isDevicePolicy { return try cutDevice(record, node, path) }
        guard node.status.kind == .characterDevice else {
            return .notCut(path, "a regular file: Linux cannot revoke the descriptors of a regular file")
        }
        if isOpenByNobody(node) { return .notCut(path, "nothing has it open") }
        let terminal: FileDescriptor
        do throws(Errno) {
            terminal = try node.descriptor.reopen(O_RDWR)
        } catch {
            throw NodeError(.failed, "cut", path, "open: \(error)")
        }
        defer { terminal.close() }
        guard terminal.isTerminal else {
            return .notCut(path, "a character device that is not a terminal: only terminals are hung up here")
        }
        do throws(Errno) {
            try terminal.hangUpTerminal()
        } catch {
            let code: NodeError.Code = error.rawValue == EPERM ? .notPermitted : .failed
            throw NodeError(code, "cut", path, "TIOCVHANGUP: \(error)")
        }
        return CutOutcome(path: path, method: .hungUp)
    }

    /// Whether a scan found nothing that has the node open. Only what is open is cut (a re-authorization
    /// re-enumerates the device: not for nothing); a scan that failed, or stopped at its time limit, counts as open.
    private func isOpenByNobody(_ node: OpenedNode) -> Bool {
        guard let scan = try? openerScanner.scan([node.status]) else { return false }  // try?: counts as open
        return scan.complete && scan.openers[0].isEmpty
    }

    /// ``cut(_:)`` of a real device's node.
    private func cutDevice(_ record: NodeRecord, _ node: OpenedNode, _ path: String) throws(NodeError) -> CutOutcome {
        guard let device = record.device, Self.cuttableKinds.contains(device.kind), let usbDevice = device.usbDevice
        else {
            let kind = record.device?.kind ?? "unknown kind"
            return .notCut(
                path,
                "not a USB device's node or a USB serial port (\(kind)): Linux revokes no other process's descriptor "
                    + "of it (evdev's EVIOCREVOKE revokes only the caller's), and its nearest USB device, if any, is "
                    + "shared (a Bluetooth adapter)")
        }
        let others = records.values.filter {
            $0.key != record.key && $0.device?.usbDevice == usbDevice && $0.holder.uid != record.holder.uid
        }
        if !others.isEmpty {
            let held = others.sorted { $0.path < $1.path }.map { "\($0.path) (uid \($0.holder.uid))" }
            return .notCut(
                path,
                "a cut hangs up every node of \(usbDevice), and \(held.joined(separator: ", ")) is held for another "
                    + "user: another user's claim is not cut for this one's")
        }
        if device.syspath == usbDevice {
            guard let hubPort = device.hubPort else {
                return .notCut(
                    path,
                    "a USB device node (usbfs): re-authorizing only unconfigures the device, and its descriptors stay "
                        + "usable; its hub port cannot be disabled and enabled again here (no disable attribute, or a "
                        + "hub without power switching, on which the device would not come back until replugged)")
            }
            if isOpenByNobody(node) { return .notCut(path, "nothing has it open") }
            try write("1", "disable", of: hubPort, cutting: path)
            usleep(useconds_t(portPowerOffMilliseconds * 1000))
            try write("0", "disable", of: hubPort, cutting: path)
            return CutOutcome(path: path, method: .portDisabled, usbDevice: usbDevice, hubPort: hubPort)
        }
        if isOpenByNobody(node) { return .notCut(path, "nothing has it open") }
        let nodes = records.values.filter { $0.device?.usbDevice == usbDevice }
        try write("0", "authorized", of: usbDevice, cutting: path)
        try write("1", "authorized", of: usbDevice, cutting: path)
        let late = waitForReenumeration(of: nodes)
        return CutOutcome(
            path: path, method: .reauthorized, usbDevice: usbDevice,
            reason: late.isEmpty ? nil : "not back within \(reenumerationWait): \(late.joined(separator: ", "))")
    }

    private func write(_ value: String, _ attribute: String, of syspath: String, cutting path: String) throws(NodeError)
    {
        do throws(Errno) {
            try writeAttribute(value, attribute, of: syspath)
        } catch {
            throw NodeError(.failed, "cut", path, "write \(value) to \(syspath)/\(attribute): \(error)")
        }
    }

    /// Waits, at most ``reenumerationWait``, until each of `nodes` is there again as a new inode, then for udev to
    /// finish what is queued; returns the paths that did not come back in time.
    private func waitForReenumeration(of nodes: [NodeRecord]) -> [String] {
        let clock = ContinuousClock()
        let deadline = clock.now + reenumerationWait
        var pending = nodes
        while true {
            pending = pending.filter { record in
                guard let node = try? open(record.path, "cut", checkingDevice: false) else { return true }  // try?: not yet
                defer { node.close() }
                return record.isSameFile(as: node.status)
            }
            if pending.isEmpty || clock.now >= deadline { break }
            usleep(10_000)
        }
        if case .devices(_, let directory) = policy {
            let (seconds, attoseconds) = max(deadline - clock.now, .milliseconds(100)).components
            _ = directory.waitUntilSettled(milliseconds: Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000))
        }
        return pending.map(\.path).sorted()
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
        let due = pendingUdevChanges.filter { $0.port == port }.map(\.syspath)
        if !due.isEmpty {
            pendingUdevChanges.removeAll { $0.port == port }
            try persist("unmark-port", port)
        }
        // Every device udev set up while the port was marked has root-only nodes (72-accmon-claims.rules), not only
        // those a claim held and released: a sibling port, the usbfs node during a serial-only claim, a bootloader
        // that came and went, the nodes a cut re-created. Those a claim holds now are left to their release.
        var setUp: [String] = []
        if case .devices(_, let directory) = policy {
            _ = directory.waitUntilSettled(milliseconds: 2000)
            let held = Set(records.values.compactMap { $0.device?.syspath })
            setUp = directory.devicesSetUp(onClaimedPort: port).filter { !held.contains($0) }
        }
        var asked: Set<String> = []
        return (due + setUp.sorted()).filter { asked.insert($0).inserted }.compactMap {
            triggerChange($0) ? $0 : nil
        }
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
        return try openerScanner.scan([node.status]).openers[0]
    }

    /// The openers of each of `paths`, in one scan; a node that cannot be opened has none, and so has every node
    /// when the scan fails.
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
        let found = (try? openerScanner.scan(files).openers) ?? files.map { _ in [] }  // try?: none named
        return indices.map { $0.map { found[$0] } ?? [] }
    }
}
