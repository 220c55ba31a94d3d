public import AccmonNodes
import AccmonUdev

/// The helper's device check: a node may be held only when its device number belongs to a device that accmon's udev
/// rules marked (`70-accmon.rules`: the property `ACCMON_KIND`), asked of libudev from the number
/// (`udev_device_new_from_devnum`: the kernel's `/sys/dev/char/MAJOR:MINOR`, then udev's database).
///
/// The property, not the tag the same rule sets: the database is written by udevd alone (root), so either says
/// the same, and umockdev's test beds carry properties but not tags. `ACCMON_CLAIMED_PORT` (set by
/// `72-accmon-claims.rules` when the node appeared on a marked port) says the node is root-only for that reason.
///
/// - Important: libudev objects live on one thread: call it on the keeper's thread only (it makes its own context).
public enum UdevNodeCheck {
    public static func check(_ deviceNumber: UInt64) throws(NodeError) -> NodeDevice {
        let number = "device number \(deviceNumber)"
        let context: UdevContext
        do throws(UdevError) {
            context = try UdevContext()
        } catch {
            throw NodeError(.failed, "udev", number, "\(error)")
        }
        guard let device = UdevDevice(context: context, characterDevice: deviceNumber) else {
            throw NodeError(.notMarked, "udev", number, "no such device in /sys/dev/char")
        }
        guard let kind = device.property("ACCMON_KIND"), !kind.isEmpty else {
            throw NodeError(.notMarked, "udev", number, "\(device.syspath) is not marked for accmon (no ACCMON_KIND)")
        }
        let usb = device.nearest(subsystem: "usb", devtype: "usb_device")
        return NodeDevice(
            syspath: device.syspath, kind: kind, usbDevice: usb?.syspath, port: usb?.sysname,
            onClaimedPort: device.property("ACCMON_CLAIMED_PORT").map { !$0.isEmpty } ?? false)
    }
}
