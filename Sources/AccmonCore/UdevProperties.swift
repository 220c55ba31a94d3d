/// A udev property that classification reads. Sources copy only these from a device (and its ancestors) into
/// ``DeviceRecord/properties``: a udev event carries some 30 properties, and accmond reads these 14.
public enum UdevProperty: Int, CaseIterable, Sendable {
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
    /// `ID_SERIAL_SHORT`: the serial number.
    case serialShort
    /// `ID_REVISION`: the USB `bcdDevice`.
    case revision
    /// `PRODUCT`: a USB device's `vendor/product/bcdDevice` from its uevent (the kernel's).
    case product
    /// `TYPE`: a USB device's `class/subclass/protocol` from its uevent (the kernel's).
    case type

    /// The property's udev name, such as `ID_VENDOR_ID`.
    public var udevName: String {
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
        case .revision: "ID_REVISION"
        case .product: "PRODUCT"
        case .type: "TYPE"
        }
    }
}

/// The values of one device's ``UdevProperty`` properties: a slot per property, so that setting and reading one
/// costs no hashing (this is on every udev event's path).
public struct UdevProperties: Sendable, Hashable, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    /// One slot per ``UdevProperty`` case; empty until a value is set.
    private var values: [String?] = []
    private static let slotCount = UdevProperty.allCases.count

    /// No properties.
    public init() {}

    /// The given properties.
    public init(dictionaryLiteral elements: (UdevProperty, String)...) {
        for (property, value) in elements { self[property] = value }
    }

    /// The value of `property`, `nil` when the device does not have it.
    public subscript(property: UdevProperty) -> String? {
        get { values.isEmpty ? nil : values[property.rawValue] }
        set {
            if values.isEmpty {
                guard newValue != nil else { return }
                values = Array(repeating: nil, count: Self.slotCount)
            }
            values[property.rawValue] = newValue
        }
    }

    /// The properties that have a value, as `[NAME: "value", ...]`.
    public var description: String {
        let named = UdevProperty.allCases.compactMap { property in
            self[property].map { "\(property.udevName): \($0.debugDescription)" }
        }
        return "[\(named.isEmpty ? ":" : named.joined(separator: ", "))]"
    }

    public static func == (left: UdevProperties, right: UdevProperties) -> Bool {
        UdevProperty.allCases.allSatisfy { left[$0] == right[$0] }
    }

    public func hash(into hasher: inout Hasher) {
        for property in UdevProperty.allCases { hasher.combine(self[property]) }
    }
}
