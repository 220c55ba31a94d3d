/// Which nodes a ``NodeKeeper`` may touch.
public enum NodePolicy {
    /// The nodes of simulated accessories (`accmond --simulate --simulated-nodes DIR`): regular files and character
    /// devices (a test's files, or ptys it made with `mknod`) below the directory, reached without any symbolic link.
    case beneath(String)
    /// Real device nodes (the helper): character devices below `directory` (`/dev`), on its file system and reached
    /// without any symbolic link, whose device number `check` accepts: a device udev marked for accmon. `check`
    /// runs on the keeper's thread, and throws ``NodeError`` (`not-marked`) for a device it refuses.
    case devices(in: String, check: (_ deviceNumber: UInt64) throws(NodeError) -> NodeDevice)

    /// Real device nodes below `/dev`.
    public static func devices(_ check: @escaping (_ deviceNumber: UInt64) throws(NodeError) -> NodeDevice) -> Self {
        .devices(in: "/dev", check: check)
    }

    /// The directory every node must be below.
    var directory: String {
        switch self {
        case .beneath(let directory), .devices(in: let directory, check: _): directory
        }
    }
}

/// What the device check knows of a node's device (udev's view, for the helper).
public struct NodeDevice: Sendable, Hashable, Codable {
    /// The device's sysfs path.
    public var syspath: String
    /// Its `ACCMON_KIND` (`serial`, `usb`, `bluetooth-hid`).
    public var kind: String
    /// The sysfs path of the USB device it belongs to (itself for a `usb_device`), whose `authorized` attribute
    /// cuts its nodes' descriptors; `nil` off USB.
    public var usbDevice: String?
    /// That USB device's port path (`1-1.2`).
    public var port: String?
    /// The shipped rule made the node root-only because its port was marked (`ACCMON_CLAIMED_PORT`).
    public var onClaimedPort: Bool

    public init(
        syspath: String, kind: String, usbDevice: String? = nil, port: String? = nil, onClaimedPort: Bool = false
    ) {
        self.syspath = syspath
        self.kind = kind
        self.usbDevice = usbDevice
        self.port = port
        self.onClaimedPort = onClaimedPort
    }
}

/// A USB port path as the kernel names a USB device: bus, `-`, then port numbers joined by `.` (`1-1.2`), at most 7.
public func isUSBPortPath(_ text: String) -> Bool {
    let parts = text.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
    guard text.utf8.count <= 64, parts.count == 2 else { return false }
    func isNumber(_ part: Substring) -> Bool {
        !part.isEmpty && part.utf8.count <= 3 && part.utf8.allSatisfy { (0x30...0x39).contains($0) }
    }
    let ports = parts[1].split(separator: ".", omittingEmptySubsequences: false)
    // USB allows at most 5 hubs between the root hub and a device: at most 6 port numbers (7 with slack).
    return isNumber(parts[0]) && ports.count <= 7 && ports.allSatisfy(isNumber)
}
