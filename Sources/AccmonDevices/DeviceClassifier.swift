import AccmonProtocol

/// How a device record is classified.
public enum Classification: Sendable, Hashable {
    /// A whole accessory, reported under `key` (its sysfs path).
    case accessory(key: String, Accessory)
    /// A device node of a Bluetooth HID accessory whose key is its `hid` device: one accessory per physical device,
    /// whatever the number of input event nodes under it.
    case bluetoothHIDNode(key: String, node: String, Accessory)
    /// Not an accessory kind accmond handles (a virtual tty, a root hub); `reason` says why (logged at trace level).
    case ignored(reason: String)
    /// Looks like an accessory but its data is unusable (non-hex ids); `reason` says why (logged as a notice).
    case rejected(reason: String)
}

/// Turns udev device records into accessories. Pure; the rules are in docs/ACCESSORIES.md.
public enum DeviceClassifier {
    /// The longest string accepted from a device; longer ones are cut (a device can report anything).
    public static let maximumFieldLength = 256

    /// What ``DeviceTracker/apply(_:)`` and ``classify(_:)`` read of a device beyond its own fields and properties:
    /// a source fills only these into the ``DeviceRecord`` (each sysfs attribute and ancestor costs system calls).
    public struct RecordNeeds: Sendable, Hashable {
        /// The device's ``UdevProperty`` properties (a `remove` or `unbind` needs none).
        public var properties = true
        /// The device's own ``SysfsAttribute/usbDevice`` attributes.
        public var attributes = false
        /// ``DeviceRecord/usbDevice``, ``DeviceRecord/usbInterface``, ``DeviceRecord/hidDevice``.
        public var usbDevice = false, usbInterface = false, hidDevice = false
    }

    /// What a record of a device with these fields must hold for the tracker to decide about it; keep it in step with
    /// ``classify(_:)`` and the `classify…` functions below. A `remove` or `unbind` needs nothing: the tracker reads
    /// only its syspath.
    public static func needs(action: String, subsystem: String, devtype: String, sysname: String) -> RecordNeeds {
        var needs = RecordNeeds()
        if action == "remove" || action == "unbind" {
            needs.properties = false
            return needs
        }
        switch subsystem {
        case "usb" where devtype == "usb_device":
            needs.attributes = true
        case "tty" where sysname.hasPrefix("ttyUSB") || sysname.hasPrefix("ttyACM"):
            needs.usbDevice = true
            needs.usbInterface = true
        case "input" where sysname.hasPrefix("event"):
            needs.hidDevice = true
        default:
            break
        }
        return needs
    }

    /// Classifies `record`.
    public static func classify(_ record: DeviceRecord) -> Classification {
        switch record.subsystem {
        case "usb" where record.devtype == "usb_device": return classifyUSBDevice(record)
        case "usb": return .ignored(reason: "a USB \(record.devtype.isEmpty ? "node" : record.devtype), not a device")
        case "tty": return classifySerial(record)
        case "input": return classifyInput(record)
        case "hid": return .ignored(reason: "a HID device is announced through its input event node")
        default: return .ignored(reason: "subsystem \(record.subsystem) is not watched")
        }
    }

    static func classifyUSBDevice(_ record: DeviceRecord) -> Classification {
        let device = AncestorRecord(
            syspath: record.syspath, properties: record.properties, attributes: record.attributes,
            descriptorsSHA256: record.descriptorsSHA256)
        if record.sysname.hasPrefix("usb") { return .ignored(reason: "a root hub") }
        if device.attributes[.bDeviceClass] == "09" { return .ignored(reason: "a hub") }
        if device.attributes[.removable] == "fixed" { return .ignored(reason: "an internal (non-removable) device") }
        guard !record.devnode.isEmpty else { return .ignored(reason: "no device node yet") }
        switch usbIdentity(device) {
        case .failure(let reason):
            return .rejected(reason: reason.description)
        case .success(var accessory):
            accessory.kind = .usb
            accessory.deviceNodes = [record.devnode]
            accessory.sysfsPath = record.syspath
            accessory.accessoryID = accessory.derivedAccessoryID
            return .accessory(key: record.syspath, accessory)
        }
    }

    static func classifySerial(_ record: DeviceRecord) -> Classification {
        guard record.sysname.hasPrefix("ttyUSB") || record.sysname.hasPrefix("ttyACM") else {
            return .ignored(reason: "not a USB serial port (ttyUSB*, ttyACM*)")
        }
        guard let usbDevice = record.usbDevice else { return .ignored(reason: "no parent USB device") }
        guard !record.devnode.isEmpty else { return .ignored(reason: "no device node yet") }
        switch usbIdentity(usbDevice) {
        case .failure(let reason):
            return .rejected(reason: "parent USB device: \(reason)")
        case .success(var accessory):
            accessory.kind = .serial
            let byID = (record.properties[.devlinks] ?? "").split(separator: " ").map(String.init)
                .filter { $0.hasPrefix("/dev/serial/by-id/") }.sorted()
            accessory.deviceNodes = [record.devnode] + byID
            accessory.sysfsPath = record.syspath
            accessory.interfaceNumber = cleaned(record.usbInterface?.attributes[.bInterfaceNumber] ?? "")
            accessory.accessoryID = accessory.derivedAccessoryID
            return .accessory(key: record.syspath, accessory)
        }
    }

    static func classifyInput(_ record: DeviceRecord) -> Classification {
        guard record.sysname.hasPrefix("event") else {
            return .ignored(reason: "an input device is announced through its event node")
        }
        guard !record.devnode.isEmpty else { return .ignored(reason: "no device node yet") }
        let hidID = record.hidDevice?.properties[.hidID] ?? ""
        let onBluetooth = hidID.hasPrefix("0005:") || record.properties[.bus] == "bluetooth"
        guard onBluetooth else { return .ignored(reason: "not on the Bluetooth bus") }
        guard let hid = record.hidDevice else { return .ignored(reason: "no parent HID device") }
        let parts = hidID.split(separator: ":")
        guard parts.count == 3, let vendor = UInt32(parts[1], radix: 16), let product = UInt32(parts[2], radix: 16),
            vendor <= 0xFFFF, product <= 0xFFFF
        else {
            return .rejected(reason: "HID_ID '\(cleaned(hidID))' is not bus:vendor:product in hex")
        }
        var accessory = Accessory(
            kind: .bluetoothHID,
            name: cleaned(hid.properties[.hidName] ?? record.properties[.inputName] ?? ""),
            serialNumber: cleaned(hid.properties[.hidUniq] ?? ""),
            vendorID: hex4(vendor), productID: hex4(product),
            sysfsPath: hid.syspath)
        accessory.accessoryID = accessory.derivedAccessoryID
        return .bluetoothHIDNode(key: hid.syspath, node: record.devnode, accessory)
    }

    struct Rejection: Error, CustomStringConvertible {
        var description: String
    }

    /// Reads a USB device's identity; rejects a device whose ids are not hex.
    static func usbIdentity(_ device: AncestorRecord) -> Result<Accessory, Rejection> {
        func value(_ attribute: SysfsAttribute, _ property: UdevProperty) -> String {
            cleaned(device.attributes[attribute] ?? device.properties[property] ?? "")
        }
        let vendorText = value(.idVendor, .vendorID)
        let productText = value(.idProduct, .modelID)
        guard let vendor = hexID(vendorText) else {
            return .failure(Rejection(description: "vendor id '\(vendorText)' is not 4 hex digits"))
        }
        guard let product = hexID(productText) else {
            return .failure(Rejection(description: "product id '\(productText)' is not 4 hex digits"))
        }
        // The accessory id is derived by the caller, once kind, nodes and paths are known.
        return .success(
            Accessory(
                kind: .usb, accessoryID: "",
                name: value(.product, .model),
                manufacturer: value(.manufacturer, .vendor),
                modelNumber: product,
                serialNumber: value(.serial, .serialShort),
                firmwareRevision: revision(value(.bcdDevice, .revision)),
                vendorID: vendor, productID: product,
                portPath: device.sysname, descriptorsSHA256: device.descriptorsSHA256))
    }

    /// A vendor or product id as four lowercase hex digits, or `nil`.
    static func hexID(_ text: String) -> String? { Hex.usbID(text) }

    static func hex4(_ value: UInt32) -> String {
        Hex.lowercase(Int(value), digits: 4)
    }

    /// `bcdDevice` `"0600"` as `"6.00"`; other text unchanged.
    static func revision(_ bcd: String) -> String {
        let digits = bcd.utf8
        guard digits.count == 4, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return bcd }
        let skipped = digits.first == UInt8(ascii: "0") ? 1 : 0
        return String(unsafeUninitializedCapacity: 5 - skipped) { text in
            var count = 0
            for (index, digit) in digits.enumerated() where index >= skipped {
                if index == 2 {
                    text[count] = UInt8(ascii: ".")
                    count += 1
                }
                text[count] = digit
                count += 1
            }
            return count
        }
    }

    /// Trims whitespace and control characters and cuts the text to ``maximumFieldLength`` characters.
    static func cleaned(_ text: String) -> String {
        // Most device strings are short printable ASCII with no outer spaces: nothing to change. (Checked on
        // contiguous bytes: through the UTF-8 view each byte costs several times as much.)
        let unchanged = text.utf8.withContiguousStorageIfAvailable { bytes in
            bytes.count <= maximumFieldLength && bytes.first != 0x20 && bytes.last != 0x20
                && bytes.allSatisfy { $0 >= 0x20 && $0 < 0x7F }
        }
        if unchanged == true { return text }
        let printable = String(
            String.UnicodeScalarView(text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }))
        let trimmed = printable.drop { $0 == " " }.reversed().drop { $0 == " " }.reversed()
        return String(String(trimmed).prefix(maximumFieldLength))
    }
}
