extension Accessory {
    enum CodingKeys: String, CodingKey {
        case kind, accessoryID, connectionID, name, manufacturer, modelNumber, serialNumber, firmwareRevision
        case hardwareRevision, vendorID, productID, protocolStrings, deviceNodes, sysfsPath, portPath, interfaceNumber
        case descriptorsSHA256
    }

    /// Decodes an accessory; only `kind` is required, absent fields are empty and a missing `accessoryID` is derived.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        func text(_ key: CodingKeys) throws -> String { try c.decodeIfPresent(String.self, forKey: key) ?? "" }
        self.init(
            kind: try c.decode(AccessoryKind.self, forKey: .kind),
            accessoryID: try c.decodeIfPresent(String.self, forKey: .accessoryID),
            connectionID: try c.decodeIfPresent(ConnectionID.self, forKey: .connectionID) ?? ConnectionID(0),
            name: try text(.name), manufacturer: try text(.manufacturer), modelNumber: try text(.modelNumber),
            serialNumber: try text(.serialNumber), firmwareRevision: try text(.firmwareRevision),
            hardwareRevision: try text(.hardwareRevision), vendorID: try text(.vendorID),
            productID: try text(.productID),
            protocolStrings: try c.decodeIfPresent([String].self, forKey: .protocolStrings) ?? [],
            deviceNodes: try c.decodeIfPresent([String].self, forKey: .deviceNodes) ?? [],
            sysfsPath: try text(.sysfsPath), portPath: try text(.portPath),
            interfaceNumber: try text(.interfaceNumber), descriptorsSHA256: try text(.descriptorsSHA256))
    }

    /// Encodes every field, empty ones included, so that clients see a fixed shape.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(kind, forKey: .kind)
        try c.encode(accessoryID, forKey: .accessoryID)
        try c.encode(connectionID, forKey: .connectionID)
        try c.encode(name, forKey: .name)
        try c.encode(manufacturer, forKey: .manufacturer)
        try c.encode(modelNumber, forKey: .modelNumber)
        try c.encode(serialNumber, forKey: .serialNumber)
        try c.encode(firmwareRevision, forKey: .firmwareRevision)
        try c.encode(hardwareRevision, forKey: .hardwareRevision)
        try c.encode(vendorID, forKey: .vendorID)
        try c.encode(productID, forKey: .productID)
        try c.encode(protocolStrings, forKey: .protocolStrings)
        try c.encode(deviceNodes, forKey: .deviceNodes)
        try c.encode(sysfsPath, forKey: .sysfsPath)
        try c.encode(portPath, forKey: .portPath)
        try c.encode(interfaceNumber, forKey: .interfaceNumber)
        try c.encode(descriptorsSHA256, forKey: .descriptorsSHA256)
    }
}
