/// A value copy of what libudev says about one device, taken on the thread that owns libudev: everything
/// classification needs, so that the decision is pure logic.
public struct DeviceRecord: Sendable, Hashable {
    /// The udev action: `add`, `remove`, `change`, `bind`, `unbind`, ..., or empty for a coldplug enumeration.
    public var action: String
    /// The device's sysfs path, such as `/sys/devices/pci0000:00/0000:00:14.0/usb1/1-1`.
    public var syspath: String
    /// The subsystem, such as `usb`, `tty`, `hid` or `input`.
    public var subsystem: String
    /// The device type, such as `usb_device`, or empty.
    public var devtype: String
    /// The last component of the sysfs path, such as `1-1.2` or `ttyUSB0`.
    public var sysname: String
    /// The device node, such as `/dev/ttyUSB0`, or empty when the device has none (yet).
    public var devnode: String
    /// udev properties (`ID_VENDOR_ID`, `HID_ID`, `DEVLINKS`, ...).
    public var properties: [String: String]
    /// sysfs attributes read for classification (`idVendor`, `serial`, `bDeviceClass`, `removable`, ...).
    public var attributes: [String: String]
    /// The nearest `usb_device` ancestor (for a tty: the adapter).
    public var usbDevice: AncestorRecord?
    /// The nearest `usb_interface` ancestor.
    public var usbInterface: AncestorRecord?
    /// The nearest `hid` ancestor (for an input event device).
    public var hidDevice: AncestorRecord?
    /// For a `usb_device`: the SHA-256 of its raw `descriptors` (64 hex digits), empty when unreadable.
    public var descriptorsSHA256: String

    /// Creates a record.
    public init(
        action: String, syspath: String, subsystem: String, devtype: String = "", sysname: String? = nil,
        devnode: String = "", properties: [String: String] = [:], attributes: [String: String] = [:],
        usbDevice: AncestorRecord? = nil, usbInterface: AncestorRecord? = nil, hidDevice: AncestorRecord? = nil,
        descriptorsSHA256: String = ""
    ) {
        self.action = action
        self.syspath = syspath
        self.subsystem = subsystem
        self.devtype = devtype
        self.sysname = sysname ?? String(syspath.split(separator: "/").last ?? "")
        self.devnode = devnode
        self.properties = properties
        self.attributes = attributes
        self.usbDevice = usbDevice
        self.usbInterface = usbInterface
        self.hidDevice = hidDevice
        self.descriptorsSHA256 = descriptorsSHA256
    }
}

/// What a ``DeviceRecord`` says about one of the device's ancestors.
public struct AncestorRecord: Sendable, Hashable {
    /// The ancestor's sysfs path.
    public var syspath: String
    /// Its udev properties.
    public var properties: [String: String]
    /// Its sysfs attributes read for classification.
    public var attributes: [String: String]
    /// For a `usb_device`: the SHA-256 of its raw `descriptors`, empty when unreadable.
    public var descriptorsSHA256: String

    /// Creates an ancestor record.
    public init(
        syspath: String, properties: [String: String] = [:], attributes: [String: String] = [:],
        descriptorsSHA256: String = ""
    ) {
        self.syspath = syspath
        self.properties = properties
        self.attributes = attributes
        self.descriptorsSHA256 = descriptorsSHA256
    }

    /// The last component of the sysfs path.
    public var sysname: String { String(syspath.split(separator: "/").last ?? "") }
}

/// The subsystems accmond watches; the udev monitor filters on these.
public let watchedSubsystems = ["usb", "tty", "hid", "input"]

/// The sysfs attributes read from a `usb_device` (itself or an ancestor).
public let usbDeviceAttributes = [
    "idVendor", "idProduct", "serial", "manufacturer", "product", "bcdDevice", "bDeviceClass", "removable",
]

/// The `usb_device` attributes that the kernel also puts in the device's uevent, as sysfs shows them: `idVendor`,
/// `idProduct` and `bcdDevice` (`%04x`) from `PRODUCT` (`%x/%x/%x`), and `bDeviceClass` (`%02x`) from `TYPE`
/// (`%d/%d/%d`). Both come from the device descriptor, like the attribute files. A source takes these from the
/// properties and reads only the other attributes from sysfs, which saves four file reads per device; the result
/// is empty when either property is missing or malformed, and the source then reads every attribute.
public func usbDeviceAttributes(fromUeventProperties properties: [String: String]) -> [String: String] {
    func fields(_ name: String, radix: Int) -> [Int]? {
        guard let value = properties[name] else { return nil }
        let parts = value.split(separator: "/", omittingEmptySubsequences: false)
        let numbers = parts.compactMap { part in
            part.count <= 4 && part.allSatisfy({ $0.isASCII && $0.isHexDigit }) ? Int(part, radix: radix) : nil
        }
        return numbers.count == 3 && parts.count == 3 ? numbers : nil
    }
    guard let product = fields("PRODUCT", radix: 16), let type = fields("TYPE", radix: 10), type[0] <= 0xFF else {
        return [:]
    }
    func hex(_ value: Int, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
    return [
        "idVendor": hex(product[0], digits: 4), "idProduct": hex(product[1], digits: 4),
        "bcdDevice": hex(product[2], digits: 4), "bDeviceClass": hex(type[0], digits: 2),
    ]
}
