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
///
/// A value type whose fields (all but the connection id) live in one shared, copy-on-write box: an accessory is
/// copied at every step from udev to the subscribers (registry, authentication, events, preserved sessions), and
/// copying seventeen fields cost more retains and releases than any other work per event.
public struct Accessory: Sendable, Hashable, CustomReflectable {
    private var box: Box

    /// What kind of accessory this is.
    public var kind: AccessoryKind {
        get { box.fields.kind }
        set { uniqueFields.kind = newValue }
    }
    /// A stable identifier: the same physical accessory keeps it across replugs when it has a serial number.
    public var accessoryID: String {
        get { box.fields.accessoryID }
        set { uniqueFields.accessoryID = newValue }
    }
    /// This connection's identifier, assigned by the daemon when the accessory connects. Kept beside the box: the
    /// registry sets it on every accessory that connects, which would otherwise copy the box of one still shared with
    /// the report it came in.
    public var connectionID: ConnectionID
    /// The accessory's display name (USB product string, Bluetooth name).
    public var name: String {
        get { box.fields.name }
        set { uniqueFields.name = newValue }
    }
    /// The manufacturer's name.
    public var manufacturer: String {
        get { box.fields.manufacturer }
        set { uniqueFields.manufacturer = newValue }
    }
    /// The model number.
    public var modelNumber: String {
        get { box.fields.modelNumber }
        set { uniqueFields.modelNumber = newValue }
    }
    /// The serial number, empty when the device has none.
    public var serialNumber: String {
        get { box.fields.serialNumber }
        set { uniqueFields.serialNumber = newValue }
    }
    /// The firmware revision (for USB, `bcdDevice`).
    public var firmwareRevision: String {
        get { box.fields.firmwareRevision }
        set { uniqueFields.firmwareRevision = newValue }
    }
    /// The hardware revision.
    public var hardwareRevision: String {
        get { box.fields.hardwareRevision }
        set { uniqueFields.hardwareRevision = newValue }
    }
    /// The vendor id as four lowercase hex digits, such as `"0403"`.
    public var vendorID: String {
        get { box.fields.vendorID }
        set { uniqueFields.vendorID = newValue }
    }
    /// The product id as four lowercase hex digits, such as `"6001"`.
    public var productID: String {
        get { box.fields.productID }
        set { uniqueFields.productID = newValue }
    }
    /// The protocols the accessory speaks, as `EAAccessory.protocolStrings`.
    public var protocolStrings: [String] {
        get { box.fields.protocolStrings }
        set { uniqueFields.protocolStrings = newValue }
    }
    /// The device nodes through which an app talks to the accessory, such as `/dev/ttyUSB0`.
    public var deviceNodes: [String] {
        get { box.fields.deviceNodes }
        set { uniqueFields.deviceNodes = newValue }
    }
    /// The device's path in sysfs.
    public var sysfsPath: String {
        get { box.fields.sysfsPath }
        set { uniqueFields.sysfsPath = newValue }
    }
    /// The USB port path, such as `"1-1.2"`.
    public var portPath: String {
        get { box.fields.portPath }
        set { uniqueFields.portPath = newValue }
    }
    /// For a serial port on a USB device, the number of the USB interface behind it (`bInterfaceNumber`, such as
    /// `"00"`); empty otherwise.
    public var interfaceNumber: String {
        get { box.fields.interfaceNumber }
        set { uniqueFields.interfaceNumber = newValue }
    }
    /// For a USB accessory, the SHA-256 of its raw USB descriptors (the sysfs `descriptors` attribute) as 64
    /// lowercase hex digits, which a manifest entry can pin against spoofing; empty when unknown.
    public var descriptorsSHA256: String {
        get { box.fields.descriptorsSHA256 }
        set { uniqueFields.descriptorsSHA256 = newValue }
    }

    /// Creates an accessory; ``accessoryID`` defaults to one derived from the identity fields.
    public init(
        kind: AccessoryKind, accessoryID: String? = nil, connectionID: ConnectionID = ConnectionID(0),
        name: String = "", manufacturer: String = "", modelNumber: String = "", serialNumber: String = "",
        firmwareRevision: String = "", hardwareRevision: String = "", vendorID: String = "", productID: String = "",
        protocolStrings: [String] = [], deviceNodes: [String] = [], sysfsPath: String = "", portPath: String = "",
        interfaceNumber: String = "", descriptorsSHA256: String = ""
    ) {
        box = Box(
            Fields(
                kind: kind, accessoryID: "", name: name, manufacturer: manufacturer,
                modelNumber: modelNumber, serialNumber: serialNumber, firmwareRevision: firmwareRevision,
                hardwareRevision: hardwareRevision, vendorID: vendorID, productID: productID,
                protocolStrings: protocolStrings, deviceNodes: deviceNodes, sysfsPath: sysfsPath, portPath: portPath,
                interfaceNumber: interfaceNumber, descriptorsSHA256: descriptorsSHA256))
        self.connectionID = connectionID
        box.fields.accessoryID = accessoryID ?? derivedAccessoryID
    }

    /// The stable id derived from identity: kind, vendor and product, then the serial number when there is one,
    /// else the port path (the same device in the same port), else the sysfs path; then the interface number.
    public var derivedAccessoryID: String {
        let (placeLabel, place) =
            !serialNumber.isEmpty
            ? (":serial=", serialNumber)
            : !portPath.isEmpty ? (":port=", portPath) : !sysfsPath.isEmpty ? (":sysfs=", sysfsPath) : ("", "")
        return concatenated(
            kind.rawValue, ":", vendorID.isEmpty ? "-" : vendorID, ":", productID.isEmpty ? "-" : productID,
            placeLabel, place, interfaceNumber.isEmpty ? "" : ":if=", interfaceNumber)
    }

    /// `vendorID:productID`, or `-` for a missing half.
    public var usbID: String {
        (vendorID.isEmpty ? "-" : vendorID) + ":" + (productID.isEmpty ? "-" : productID)
    }

    public static func == (lhs: Accessory, rhs: Accessory) -> Bool {
        lhs.connectionID == rhs.connectionID && (lhs.box === rhs.box || lhs.box.fields == rhs.box.fields)
    }

    public func hash(into hasher: inout Hasher) {
        box.fields.hash(into: &hasher)
        hasher.combine(connectionID)
    }

    /// The fields, as the stored properties of a plain struct would show (in `print`, `dump` and test failures).
    public var customMirror: Mirror {
        var children = Array(Mirror(reflecting: box.fields).children)
        children.insert((label: "connectionID", value: connectionID), at: 2)
        return Mirror(self, children: children, displayStyle: .struct)
    }

    /// The fields, for writing: the box is copied first when another accessory shares it.
    private var uniqueFields: Fields {
        get { box.fields }
        _modify {
            if !isKnownUniquelyReferenced(&box) { box = Box(box.fields) }
            yield &box.fields
        }
    }

    private struct Fields: Hashable {
        var kind: AccessoryKind
        var accessoryID: String
        var name: String
        var manufacturer: String
        var modelNumber: String
        var serialNumber: String
        var firmwareRevision: String
        var hardwareRevision: String
        var vendorID: String
        var productID: String
        var protocolStrings: [String]
        var deviceNodes: [String]
        var sysfsPath: String
        var portPath: String
        var interfaceNumber: String
        var descriptorsSHA256: String
    }

    /// Written only while uniquely referenced (``uniqueFields``), so sharing it between threads is safe.
    private final class Box: @unchecked Sendable {
        var fields: Fields
        init(_ fields: Fields) { self.fields = fields }
    }
}

/// `parts` one after the other, copied into one new string: it is made once per accessory classified, where
/// interpolation or `String.append` cost several times as much.
func concatenated(_ parts: String...) -> String {
    String(unsafeUninitializedCapacity: parts.reduce(0) { $0 + $1.utf8.count }) { buffer in
        var count = 0
        for var part in parts {
            part.withUTF8 { bytes in
                _ = UnsafeMutableBufferPointer(rebasing: buffer[count...]).initialize(fromContentsOf: bytes)
                count += bytes.count
            }
        }
        return count
    }
}
