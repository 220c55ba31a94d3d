import CUdev
import Glibc

extension UdevDevice {
    /// Looks up the character device with device number `deviceNumber` (`udev_device_new_from_devnum`, through
    /// `/sys/dev/char/MAJOR:MINOR` and udev's database); `nil` when the kernel has no such device.
    public convenience init?(context: UdevContext, characterDevice deviceNumber: UInt64) {
        guard let pointer = udev_device_new_from_devnum(context.pointer, CChar(UInt8(ascii: "c")), dev_t(deviceNumber))
        else { return nil }
        self.init(owning: pointer)
    }

    /// The device's sysfs path.
    public var syspath: String { udev_device_get_syspath(pointer).map { String(cString: $0) } ?? "" }

    /// The device's kernel name, such as `ttyUSB0` or `1-1.2`.
    public var sysname: String { udev_device_get_sysname(pointer).map { String(cString: $0) } ?? "" }

    /// The udev property `name` (from the kernel's uevent, or set by udev rules and kept in udev's database);
    /// `nil` when the device has none.
    public func property(_ name: String) -> String? {
        udev_device_get_property_value(pointer, name).map { String(cString: $0) }
    }

    /// Whether udev rules gave the device the tag `tag` (`TAG+=`).
    public func hasTag(_ tag: String) -> Bool { udev_device_has_tag(pointer, tag) > 0 }

    /// The nearest device, this one included, of `subsystem` and `devtype`: its sysfs path and kernel name.
    public func nearest(subsystem: String, devtype: String) -> (syspath: String, sysname: String)? {
        if udev_device_get_subsystem(pointer).map({ String(cString: $0) }) == subsystem,
            udev_device_get_devtype(pointer).map({ String(cString: $0) }) == devtype
        {
            return (syspath, sysname)
        }
        // The parent is borrowed from this device: read here, never kept.
        guard let parent = udev_device_get_parent_with_subsystem_devtype(pointer, subsystem, devtype) else {
            return nil
        }
        return (
            udev_device_get_syspath(parent).map { String(cString: $0) } ?? "",
            udev_device_get_sysname(parent).map { String(cString: $0) } ?? ""
        )
    }
}

extension UdevDevice {
    /// One device of ``ancestry``.
    public struct Link: Sendable, Hashable {
        public var subsystem: String
        public var devtype: String
        public var syspath: String
        public var sysname: String
    }

    /// This device and every parent up to the root of sysfs, nearest first (`udev_device_get_parent`).
    public var ancestry: [Link] {
        var links: [Link] = []
        var current: OpaquePointer? = pointer
        while let device = current {
            links.append(
                Link(
                    subsystem: Self.text(udev_device_get_subsystem(device)),
                    devtype: Self.text(udev_device_get_devtype(device)),
                    syspath: Self.text(udev_device_get_syspath(device)),
                    sysname: Self.text(udev_device_get_sysname(device))))
            // Each parent is borrowed from its child: read here, never kept.
            current = udev_device_get_parent(device)
        }
        return links
    }

    private static func text(_ pointer: UnsafePointer<CChar>?) -> String { pointer.map { String(cString: $0) } ?? "" }
}

/// Whether udevd has events queued that it has not finished (`udev_queue_get_queue_is_empty`: the file
/// `/run/udev/queue` exists while it does). `false` when that cannot be told.
public func udevQueueIsEmpty(context: UdevContext) -> Bool {
    guard let queue = udev_queue_new(context.pointer) else { return false }
    defer { udev_queue_unref(queue) }
    return udev_queue_get_queue_is_empty(queue) > 0
}
