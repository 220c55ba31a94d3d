extension Accessory {
    /// A field of the accessory object, in the order the protocol writes them (sorted by name): the one list the
    /// accessory's codecs follow (Codable, ``EventLineWriter``, ``EventLineReader``, the request reader). Each codec
    /// loops over ``allCases`` and reads or writes a value by its ``shape``; the getter and the setter below are the
    /// only places that name the model's properties, in switches the compiler checks for every case.
    public enum Field: String, CaseIterable, CodingKey, Sendable {
        case accessoryID, connectionID, descriptorsSHA256, deviceNodes, firmwareRevision, hardwareRevision
        case interfaceNumber, kind, manufacturer, modelNumber, name, portPath, productID, protocolStrings, serialNumber
        case sysfsPath, vendorID

        /// The JSON form of a field's value.
        public enum Shape: Sendable {
            /// A string (the kind as its raw value).
            case text
            /// An array of strings.
            case texts
            /// A non-negative integer.
            case number
        }

        public var shape: Shape {
            switch self {
            case .connectionID: .number
            case .deviceNodes, .protocolStrings: .texts
            case .accessoryID, .descriptorsSHA256, .firmwareRevision, .hardwareRevision, .interfaceNumber, .kind,
                .manufacturer, .modelNumber, .name, .portPath, .productID, .serialNumber, .sysfsPath, .vendorID:
                .text
            }
        }

        /// Every field in order with `"name":`, its key as written before its value; built once, since `allCases`
        /// builds an array at each use and the codecs run once per field of every event.
        package static let keyed: [(field: Field, quotedKey: [UInt8])] = allCases.map {
            ($0, Array("\"\($0.rawValue)\":".utf8))
        }

        /// The field whose name is `name` (the bytes between the key's quotes), or nil.
        package static func named(_ name: UnsafeBufferPointer<UInt8>) -> Field? {
            for (field, quotedKey) in keyed where quotedKey.count == name.count + 3 {
                if quotedKey.withUnsafeBufferPointer({ $0.dropFirst().prefix(name.count).elementsEqual(name) }) {
                    return field
                }
            }
            return nil
        }
    }

    /// A field's value, in its ``Field/Shape``.
    public enum FieldValue: Sendable, Hashable {
        case text(String)
        case texts([String])
        case number(UInt64)
    }

    /// The value of `field`.
    public subscript(field: Field) -> FieldValue {
        switch field {
        case .accessoryID: .text(accessoryID)
        case .connectionID: .number(connectionID.rawValue)
        case .descriptorsSHA256: .text(descriptorsSHA256)
        case .deviceNodes: .texts(deviceNodes)
        case .firmwareRevision: .text(firmwareRevision)
        case .hardwareRevision: .text(hardwareRevision)
        case .interfaceNumber: .text(interfaceNumber)
        case .kind: .text(kind.rawValue)
        case .manufacturer: .text(manufacturer)
        case .modelNumber: .text(modelNumber)
        case .name: .text(name)
        case .portPath: .text(portPath)
        case .productID: .text(productID)
        case .protocolStrings: .texts(protocolStrings)
        case .serialNumber: .text(serialNumber)
        case .sysfsPath: .text(sysfsPath)
        case .vendorID: .text(vendorID)
        }
    }

    /// Sets `field` to `value`; returns false (and changes nothing) when the value has another shape, or names no
    /// kind for ``Field/kind``.
    @discardableResult
    public mutating func set(_ field: Field, to value: FieldValue) -> Bool {
        switch (field, value) {
        case (.connectionID, .number(let number)): connectionID = ConnectionID(number)
        case (.deviceNodes, .texts(let texts)): deviceNodes = texts
        case (.protocolStrings, .texts(let texts)): protocolStrings = texts
        case (.kind, .text(let text)):
            guard let kind = AccessoryKind(rawValue: text) else { return false }
            self.kind = kind
        case (.accessoryID, .text(let text)): accessoryID = text
        case (.descriptorsSHA256, .text(let text)): descriptorsSHA256 = text
        case (.firmwareRevision, .text(let text)): firmwareRevision = text
        case (.hardwareRevision, .text(let text)): hardwareRevision = text
        case (.interfaceNumber, .text(let text)): interfaceNumber = text
        case (.manufacturer, .text(let text)): manufacturer = text
        case (.modelNumber, .text(let text)): modelNumber = text
        case (.name, .text(let text)): name = text
        case (.portPath, .text(let text)): portPath = text
        case (.productID, .text(let text)): productID = text
        case (.serialNumber, .text(let text)): serialNumber = text
        case (.sysfsPath, .text(let text)): sysfsPath = text
        case (.vendorID, .text(let text)): vendorID = text
        default: return false
        }
        return true
    }
}
