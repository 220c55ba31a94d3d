import AccmonProtocol

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
    /// The udev properties classification reads (`ID_VENDOR_ID`, `DEVLINKS`, ...).
    public var properties: UdevProperties
    /// The sysfs attributes classification reads (`idVendor`, `serial`, `bDeviceClass`, `removable`, ...).
    public var attributes: SysfsAttributes
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
        devnode: String = "", properties: UdevProperties = [:], attributes: SysfsAttributes = [:],
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
    /// The udev properties classification reads (`HID_ID`, `HID_NAME`, ...).
    public var properties: UdevProperties
    /// The sysfs attributes classification reads.
    public var attributes: SysfsAttributes
    /// For a `usb_device`: the SHA-256 of its raw `descriptors`, empty when unreadable.
    public var descriptorsSHA256: String

    /// Creates an ancestor record.
    public init(
        syspath: String, properties: UdevProperties = [:], attributes: SysfsAttributes = [:],
        descriptorsSHA256: String = ""
    ) {
        self.syspath = syspath
        self.properties = properties
        self.attributes = attributes
        self.descriptorsSHA256 = descriptorsSHA256
    }

    /// The last component of the sysfs path.
    public var sysname: String {
        guard let slash = syspath.utf8.lastIndex(of: UInt8(ascii: "/")) else { return syspath }
        return String(syspath[syspath.utf8.index(after: slash)...])
    }
}

/// The subsystems accmond watches; the udev monitor filters on these.
public let watchedSubsystems = ["usb", "tty", "hid", "input"]

/// A sysfs attribute classification reads: a `usb_device`'s, or a `usb_interface`'s number. The case names are the
/// attribute files' names.
public enum SysfsAttribute: Int, SlotKey {
    case idVendor, idProduct, serial, manufacturer, product, bcdDevice, bDeviceClass, removable
    /// A `usb_interface`'s number, such as `00`.
    case bInterfaceNumber

    /// The attributes read from a `usb_device` (itself or an ancestor).
    public static let usbDevice: [SysfsAttribute] = [
        .idVendor, .idProduct, .serial, .manufacturer, .product, .bcdDevice, .bDeviceClass, .removable,
    ]

    /// The attribute's file name in the device's sysfs directory.
    public var name: String {
        switch self {
        case .idVendor: "idVendor"
        case .idProduct: "idProduct"
        case .serial: "serial"
        case .manufacturer: "manufacturer"
        case .product: "product"
        case .bcdDevice: "bcdDevice"
        case .bDeviceClass: "bDeviceClass"
        case .removable: "removable"
        case .bInterfaceNumber: "bInterfaceNumber"
        }
    }
}

/// The values of one device's ``SysfsAttribute`` attributes.
public typealias SysfsAttributes = Slots<SysfsAttribute>
