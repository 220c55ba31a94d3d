/// The kind of an external accessory, as accmon classifies it.
public enum AccessoryKind: String, Codable, Sendable, CaseIterable, Hashable {
    /// A USB device (`usb_device` in udev).
    case usb
    /// A USB-backed serial port (`ttyUSB*`, `ttyACM*`).
    case serial
    /// A human-interface device on the Bluetooth bus.
    case bluetoothHID = "bluetooth-hid"
}

/// Identifies one connection of an accessory: unique per connection, never reused while the daemon keeps state.
///
/// The analogue of `EAAccessory.connectionID`.
public struct ConnectionID: RawRepresentable, Codable, Sendable, Hashable, Comparable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        do {
            rawValue = try container.decode(UInt64.self)
        } catch let error as DecodingError {
            throw error
        } catch {
            // A number that does not fit (negative, fractional, too big): JSONDecoder would report "not valid JSON"
            // with no path.
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "expected an integer from 0 to \(UInt64.max)")
        }
    }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { String(rawValue) }
}

/// An external accessory and one connection of it, after `EAAccessory`.
///
/// Every field but ``kind``, ``accessoryID`` and ``connectionID`` may be empty when the device does not report it.
public struct Accessory: Codable, Sendable, Hashable {
    /// What kind of accessory this is.
    public var kind: AccessoryKind
    /// A stable identifier: the same physical accessory keeps it across replugs when it has a serial number.
    public var accessoryID: String
    /// This connection's identifier, assigned by the daemon when the accessory connects.
    public var connectionID: ConnectionID
    /// The accessory's display name (USB product string, Bluetooth name).
    public var name: String
    /// The manufacturer's name.
    public var manufacturer: String
    /// The model number.
    public var modelNumber: String
    /// The serial number, empty when the device has none.
    public var serialNumber: String
    /// The firmware revision (for USB, `bcdDevice`).
    public var firmwareRevision: String
    /// The hardware revision.
    public var hardwareRevision: String
    /// The vendor id as four lowercase hex digits, such as `"0403"`.
    public var vendorID: String
    /// The product id as four lowercase hex digits, such as `"6001"`.
    public var productID: String
    /// The protocols the accessory speaks, as `EAAccessory.protocolStrings`.
    public var protocolStrings: [String]
    /// The device nodes through which an app talks to the accessory, such as `/dev/ttyUSB0`.
    public var deviceNodes: [String]
    /// The device's path in sysfs.
    public var sysfsPath: String
    /// The USB port path, such as `"1-1.2"`.
    public var portPath: String
    /// For a serial port on a USB device, the number of the USB interface behind it (`bInterfaceNumber`, such as
    /// `"00"`); empty otherwise.
    public var interfaceNumber: String
    /// For a USB accessory, the SHA-256 of its raw USB descriptors (the sysfs `descriptors` attribute) as 64
    /// lowercase hex digits, which a manifest entry can pin against spoofing; empty when unknown.
    public var descriptorsSHA256: String

    /// Creates an accessory; ``accessoryID`` defaults to one derived from the identity fields.
    public init(
        kind: AccessoryKind, accessoryID: String? = nil, connectionID: ConnectionID = ConnectionID(0),
        name: String = "", manufacturer: String = "", modelNumber: String = "", serialNumber: String = "",
        firmwareRevision: String = "", hardwareRevision: String = "", vendorID: String = "", productID: String = "",
        protocolStrings: [String] = [], deviceNodes: [String] = [], sysfsPath: String = "", portPath: String = "",
        interfaceNumber: String = "", descriptorsSHA256: String = ""
    ) {
        self.kind = kind
        self.connectionID = connectionID
        self.name = name
        self.manufacturer = manufacturer
        self.modelNumber = modelNumber
        self.serialNumber = serialNumber
        self.firmwareRevision = firmwareRevision
        self.hardwareRevision = hardwareRevision
        self.vendorID = vendorID
        self.productID = productID
        self.protocolStrings = protocolStrings
        self.deviceNodes = deviceNodes
        self.sysfsPath = sysfsPath
        self.portPath = portPath
        self.interfaceNumber = interfaceNumber
        self.descriptorsSHA256 = descriptorsSHA256
        self.accessoryID = ""
        self.accessoryID = accessoryID ?? derivedAccessoryID
    }

    /// The stable id derived from identity: kind, vendor and product, then the serial number when there is one,
    /// else the port path (the same device in the same port), else the sysfs path; then the interface number.
    public var derivedAccessoryID: String {
        var id = "\(kind.rawValue):\(usbID)"
        if !serialNumber.isEmpty {
            id += ":serial=\(serialNumber)"
        } else if !portPath.isEmpty {
            id += ":port=\(portPath)"
        } else if !sysfsPath.isEmpty {
            id += ":sysfs=\(sysfsPath)"
        }
        if !interfaceNumber.isEmpty { id += ":if=\(interfaceNumber)" }
        return id
    }

    /// `vendorID:productID`, or `-` for a missing half.
    public var usbID: String {
        "\(vendorID.isEmpty ? "-" : vendorID):\(productID.isEmpty ? "-" : productID)"
    }
}
