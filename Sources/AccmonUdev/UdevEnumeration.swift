import AccmonSys
import CUdev

/// Lists the devices present now in the given subsystems (coldplug).
public func enumerateDevices(context: UdevContext, subsystems: [String]) throws(UdevError) -> [String] {
    try enumerate(context) { enumerate throws(UdevError) in
        for subsystem in subsystems {
            let result = udev_enumerate_add_match_subsystem(enumerate, subsystem)
            if result < 0 {
                throw UdevError(
                    operation: "udev_enumerate_add_match_subsystem", object: subsystem, errno: Errno(rawValue: -result))
            }
        }
    }
}

/// Lists the devices whose udev property `name` is `value` (`udev_enumerate_add_match_property`: from udev's
/// database).
public func enumerateDevices(context: UdevContext, property name: String, value: String) throws(UdevError) -> [String] {
    try enumerate(context) { enumerate throws(UdevError) in
        let result = udev_enumerate_add_match_property(enumerate, name, value)
        if result < 0 {
            throw UdevError(
                operation: "udev_enumerate_add_match_property", object: name, errno: Errno(rawValue: -result))
        }
    }
}

/// An enumeration with the matches `match` adds, scanned: the devices' sysfs paths.
private func enumerate(
    _ context: UdevContext, _ match: (OpaquePointer) throws(UdevError) -> Void
) throws(UdevError) -> [String] {
    guard let enumerate = udev_enumerate_new(context.pointer) else {
        throw UdevError(operation: "udev_enumerate_new", object: "", errno: .current)
    }
    defer { udev_enumerate_unref(enumerate) }
    try match(enumerate)
    let result = udev_enumerate_scan_devices(enumerate)
    if result < 0 {
        throw UdevError(operation: "udev_enumerate_scan_devices", object: "", errno: Errno(rawValue: -result))
    }
    var syspaths: [String] = []
    var entry = udev_enumerate_get_list_entry(enumerate)
    while let current = entry {
        syspaths.append(String(cString: udev_list_entry_get_name(current)))
        entry = udev_list_entry_get_next(current)
    }
    return syspaths
}
