public import AccmonNodes
import AccmonSys
import AccmonUdev
import Glibc

/// The helper's view of devices, from libudev: a node may be held only when its device number belongs to a device
/// that accmon's udev rules marked (`70-accmon.rules`: the property `ACCMON_KIND`), asked from the number
/// (`udev_device_new_from_devnum`: the kernel's `/sys/dev/char/MAJOR:MINOR`, then udev's database).
///
/// The property, not the tag the same rule sets: the database is written by udevd alone (root), so either says
/// the same, and umockdev's test beds carry properties but not tags. `ACCMON_CLAIMED_PORT` (set by
/// `72-accmon-claims.rules` when the node appeared on a marked port) says the node is root-only for that reason.
///
/// - Important: libudev objects live on one thread: use it on the keeper's thread only (each call makes its own
///   context).
public struct UdevDeviceDirectory: NodeDeviceDirectory {
    /// The subsystems a node's path may cross between it and the USB device a cut re-authorizes: a tty, the
    /// usb-serial port below an interface, the interface (`usb`). Anything else (`hid`, `input`, `bluetooth`) is
    /// another bus or device on top of the USB device, which a re-authorization would take down whole.
    static let pathToTheUSBDevice: Set<String> = ["tty", "usb-serial", "usb"]

    public init() {}

    public func device(ofCharacterDevice deviceNumber: UInt64) throws(NodeError) -> NodeDevice {
        let number = "device number \(deviceNumber)"
        let context = try Self.context(number)
        guard let device = UdevDevice(context: context, characterDevice: deviceNumber) else {
            throw NodeError(.notMarked, "udev", number, "no such device in /sys/dev/char")
        }
        guard let kind = device.property("ACCMON_KIND"), !kind.isEmpty else {
            throw NodeError(.notMarked, "udev", number, "\(device.syspath) is not marked for accmon (no ACCMON_KIND)")
        }
        var found = NodeDevice(
            syspath: device.syspath, kind: kind,
            onClaimedPort: device.property("ACCMON_CLAIMED_PORT").map { !$0.isEmpty } ?? false)
        guard NodeKeeper.cuttableKinds.contains(kind), let usb = Self.usbDevice(below: device.ancestry) else {
            return found
        }
        found.usbDevice = usb.syspath
        found.port = usb.sysname
        if usb.syspath == device.syspath { found.hubPort = Self.switchedHubPort(of: usb.syspath) }
        return found
    }

    /// The nearest `usb_device` of `ancestry` (the node's device first), if the path up to it crosses only
    /// ``pathToTheUSBDevice``.
    static func usbDevice(below ancestry: [UdevDevice.Link]) -> UdevDevice.Link? {
        for link in ancestry {
            if link.subsystem == "usb" && link.devtype == "usb_device" { return link }
            guard pathToTheUSBDevice.contains(link.subsystem) else { return nil }
        }
        return nil
    }

    /// The hub port of the USB device at `syspath` (the kernel's `port` link to it), when its `disable` attribute
    /// exists (Linux 4.20) and its hub switches the port's power: the kernel shows `power/pm_qos_no_power_off`
    /// only for ports of such hubs (drivers/usb/core/port.c, `usb_hub_create_port_device`). On a hub without
    /// power switching a disabled port keeps its power, and the device is not found again until replugged.
    static func switchedHubPort(of syspath: String) -> String? {
        guard let port = realpath("\(syspath)/port", nil) else { return nil }
        defer { free(port) }
        let path = String(cString: port)
        guard path.hasPrefix("/sys/"), access("\(path)/disable", F_OK) == 0,
            access("\(path)/power/pm_qos_no_power_off", F_OK) == 0
        else { return nil }
        return path
    }

    public func devicesSetUp(onClaimedPort port: String) -> [String] {
        guard let context = try? Self.context(port) else { return [] }  // try?: none found: nothing to set up again
        return (try? enumerateDevices(context: context, property: "ACCMON_CLAIMED_PORT", value: port)) ?? []
    }

    public func waitUntilSettled(milliseconds: Int) -> Bool {
        guard let context = try? Self.context("queue") else { return false }  // try?: cannot tell: not settled
        var left = milliseconds
        while !udevQueueIsEmpty(context: context) {
            guard left > 0 else { return false }
            usleep(10_000)
            left -= 10
        }
        return true
    }

    private static func context(_ object: String) throws(NodeError) -> UdevContext {
        do throws(UdevError) {
            return try UdevContext()
        } catch {
            throw NodeError(.failed, "udev", object, "\(error)")
        }
    }
}
