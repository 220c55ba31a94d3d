import AccmonProtocol

/// A udev property that classification reads. Sources copy only these from a device (and its ancestors) into
/// ``DeviceRecord/properties``: a udev event carries some 30 properties, and accmond reads these 17.
public enum UdevProperty: Int, SlotKey {
    /// `DEVLINKS`: the device node's symbolic links, separated by spaces.
    case devlinks
    /// `ID_BUS`: the bus, such as `usb` or `bluetooth`.
    case bus
    /// `NAME`: an input device's name, in quotes.
    case inputName
    /// `HID_ID`: a HID device's `bus:vendor:product`, in hex.
    case hidID
    /// `HID_NAME`: a HID device's name.
    case hidName
    /// `HID_UNIQ`: a HID device's unique id (a Bluetooth address or a serial number).
    case hidUniq
    /// `ID_VENDOR_ID`: the USB vendor id.
    case vendorID
    /// `ID_MODEL_ID`: the USB product id.
    case modelID
    /// `ID_MODEL`: the product name, with spaces replaced.
    case model
    /// `ID_VENDOR`: the manufacturer's name, with spaces replaced.
    case vendor
    /// `ID_SERIAL_SHORT`: the serial number, with spaces and some punctuation replaced.
    case serialShort
    /// `ID_VENDOR_ENC`: the manufacturer's name, with some bytes written as `\xNN` (``decodedUdevString(_:)``).
    case vendorEncoded
    /// `ID_MODEL_ENC`: the product name, with some bytes written as `\xNN`.
    case modelEncoded
    /// `ID_REVISION`: the USB `bcdDevice`.
    case revision
    /// `PRODUCT`: a USB device's `vendor/product/bcdDevice` from its uevent (the kernel's).
    case product
    /// `TYPE`: a USB device's `class/subclass/protocol` from its uevent (the kernel's).
    case type
    /// `ACCMON_REMOVABLE`: a USB device's `removable` attribute, which accmon's udev rule copies (absent without the
    /// rule, or without the attribute).
    case accmonRemovable

    /// The property's udev name, such as `ID_VENDOR_ID`.
    public var name: String {
        switch self {
        case .devlinks: "DEVLINKS"
        case .bus: "ID_BUS"
        case .inputName: "NAME"
        case .hidID: "HID_ID"
        case .hidName: "HID_NAME"
        case .hidUniq: "HID_UNIQ"
        case .vendorID: "ID_VENDOR_ID"
        case .modelID: "ID_MODEL_ID"
        case .model: "ID_MODEL"
        case .vendor: "ID_VENDOR"
        case .serialShort: "ID_SERIAL_SHORT"
        case .vendorEncoded: "ID_VENDOR_ENC"
        case .modelEncoded: "ID_MODEL_ENC"
        case .revision: "ID_REVISION"
        case .product: "PRODUCT"
        case .type: "TYPE"
        case .accmonRemovable: "ACCMON_REMOVABLE"
        }
    }
}

/// The values of one device's ``UdevProperty`` properties.
public typealias UdevProperties = Slots<UdevProperty>
