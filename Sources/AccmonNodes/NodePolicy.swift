/// Which nodes a ``NodeKeeper`` may touch.
public enum NodePolicy {
    /// The nodes of simulated accessories (`accmond --simulate --simulated-nodes DIR`): regular files and character
    /// devices (a test's files, or ptys it made with `mknod`) below the directory, reached without any symbolic link.
    case beneath(String)
    /// Real device nodes (the helper): character devices below `directory` (`/dev`), on its file system and reached
    /// without any symbolic link, whose device number the device directory accepts: a device udev marked for accmon.
    case devices(in: String, directory: any NodeDeviceDirectory)

    /// Real device nodes below `directory` whose device `check` accepts, with nothing set up on claimed ports and
    /// nothing to wait for (a keeper that only restores, tests).
    public static func devices(
        in directory: String, check: @escaping (_ deviceNumber: UInt64) throws(NodeError) -> NodeDevice
    ) -> Self {
        .devices(in: directory, directory: CheckedDevices(check: check))
    }

    /// The directory every node must be below.
    var directory: String {
        switch self {
        case .beneath(let directory), .devices(in: let directory, directory: _): directory
        }
    }
}

/// udev's view of the devices whose nodes the helper holds (the helper's is libudev; tests inject their own). Called
/// on the keeper's thread only.
public protocol NodeDeviceDirectory {
    /// The device of the character device `deviceNumber`, if udev marked it for accmon (`ACCMON_KIND`).
    ///
    /// - Throws: ``NodeError`` `not-marked` for a device it refuses.
    func device(ofCharacterDevice deviceNumber: UInt64) throws(NodeError) -> NodeDevice
    /// The devices whose nodes udev set up while `port` was marked (`ACCMON_CLAIMED_PORT`): sysfs paths.
    func devicesSetUp(onClaimedPort port: String) -> [String]
    /// Waits until udev has no event left unfinished, at most `milliseconds`; whether it had none left by then.
    func waitUntilSettled(milliseconds: Int) -> Bool
}

/// A ``NodeDeviceDirectory`` of a check alone.
struct CheckedDevices: NodeDeviceDirectory {
    let check: (_ deviceNumber: UInt64) throws(NodeError) -> NodeDevice

    func device(ofCharacterDevice deviceNumber: UInt64) throws(NodeError) -> NodeDevice { try check(deviceNumber) }
    func devicesSetUp(onClaimedPort port: String) -> [String] { [] }
    func waitUntilSettled(milliseconds: Int) -> Bool { true }
}

/// What the device check knows of a node's device (udev's view, for the helper).
public struct NodeDevice: Sendable, Hashable, Codable {
    /// The device's sysfs path.
    public var syspath: String
    /// Its `ACCMON_KIND` (`serial`, `usb`, `bluetooth-hid`).
    public var kind: String
    /// The sysfs path of the USB device it belongs to (itself for a `usb_device`), whose re-authorization cuts its
    /// nodes' descriptors: set only for the nodes of `usb` and `serial` accessories whose path up to it crosses no
    /// other bus. `nil` off USB, and for a node behind another bus on a USB device (a Bluetooth HID device's input
    /// node, whose USB device is the Bluetooth adapter: re-authorizing it would drop every Bluetooth link).
    public var usbDevice: String?
    /// That USB device's port path (`1-1.2`).
    public var port: String?
    /// For the node of a `usb_device` itself (usbfs): the sysfs path of the hub port it is plugged in, when that
    /// port's `disable` attribute disconnects it (Linux 4.20) and the hub switches the port's power
    /// (`power/pm_qos_no_power_off`, which the kernel shows only then), so that enabling the port again brings the
    /// device back. Re-authorization leaves a usbfs descriptor usable; a disconnection does not.
    public var hubPort: String?
    /// The shipped rule made the node root-only because its port was marked (`ACCMON_CLAIMED_PORT`).
    public var onClaimedPort: Bool

    public init(
        syspath: String, kind: String, usbDevice: String? = nil, port: String? = nil, hubPort: String? = nil,
        onClaimedPort: Bool = false
    ) {
        self.syspath = syspath
        self.kind = kind
        self.usbDevice = usbDevice
        self.port = port
        self.hubPort = hubPort
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
