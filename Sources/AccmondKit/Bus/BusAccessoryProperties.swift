import AccmonProtocol
import AccmonSystemd

/// An accessory's properties on the bus (interface `org.accmon.Accmon1.Accessory`): every field of the accessory
/// model as a property of its own D-Bus type, then the claim's; pure.
///
/// The names are the fields' in CamelCase (`accessoryID` → `AccessoryID`). Identifiers are numbers where they are
/// numbers: `ConnectionID` `t`, `VendorID` and `ProductID` `q` (0 when the device does not tell). The kind is its
/// documented string (`usb`, `serial`, `bluetooth-hid`); lists are `as`. The claim's properties are empty (`""`, 0)
/// while nobody holds the accessory.
enum BusAccessoryProperties {
    /// The claim properties, in order.
    static let claimProperties: [BusInterfaceDescription.Property] = [
        .init("ClaimID", "s"), .init("ClaimState", "s"), .init("ClaimHolder", "s"), .init("ClaimHolderUID", "u"),
        .init("ClaimSince", "d"), .init("ClaimReason", "s"), .init("ClaimWaiting", "u"),
    ]

    /// The declared properties: the fields in the protocol's order, then the claim's.
    static let declared: [BusInterfaceDescription.Property] =
        Accessory.Field.allCases.map { .init(name(of: $0), signature(of: $0), changes: .const) } + claimProperties

    /// A field's property name.
    static func name(of field: Accessory.Field) -> String {
        switch field {
        case .accessoryID: "AccessoryID"
        case .connectionID: "ConnectionID"
        case .descriptorsSHA256: "DescriptorsSHA256"
        case .deviceNodes: "DeviceNodes"
        case .firmwareRevision: "FirmwareRevision"
        case .hardwareRevision: "HardwareRevision"
        case .interfaceNumber: "InterfaceNumber"
        case .kind: "Kind"
        case .manufacturer: "Manufacturer"
        case .modelNumber: "ModelNumber"
        case .name: "Name"
        case .portPath: "PortPath"
        case .productID: "ProductID"
        case .protocolStrings: "ProtocolStrings"
        case .serialNumber: "SerialNumber"
        case .sysfsPath: "SysfsPath"
        case .vendorID: "VendorID"
        }
    }

    static func signature(of field: Accessory.Field) -> String {
        switch field {
        case .connectionID: "t"
        case .vendorID, .productID: "q"
        case .deviceNodes, .protocolStrings: "as"
        default: "s"
        }
    }

    /// A field's value as its property.
    static func value(of field: Accessory.Field, _ accessory: Accessory) -> BusValue {
        switch field {
        case .vendorID: .uint16(hexID(accessory.vendorID))
        case .productID: .uint16(hexID(accessory.productID))
        default:
            switch accessory[field] {
            case .text(let text): .string(text)
            case .texts(let texts): .strings(texts)
            case .number(let number): .uint64(number)
            }
        }
    }

    /// A USB id's four hex digits as a number; 0 when empty or not hex.
    static func hexID(_ text: String) -> UInt16 { UInt16(text, radix: 16) ?? 0 }

    /// The claim's properties for `claim` (empty ones for none).
    static func claimValues(_ claim: ClaimSummary?) -> [(String, BusValue)] {
        [
            ("ClaimID", .string(claim?.claimID ?? "")),
            ("ClaimState", .string(claim?.state.rawValue ?? "")),
            ("ClaimHolder", .string(claim.map { $0.holder.user.isEmpty ? $0.holder.description : $0.holder.user } ?? "")),
            ("ClaimHolderUID", .uint32(claim?.holder.uid ?? 0)),
            ("ClaimSince", .double(claim?.since ?? 0)),
            ("ClaimReason", .string(claim?.reason ?? "")),
            ("ClaimWaiting", .uint32(UInt32(clamping: claim?.waiting ?? 0))),
        ]
    }

    /// Every property, in the declared order.
    static func all(_ accessory: Accessory, claim: ClaimSummary?) -> [(String, BusValue)] {
        Accessory.Field.allCases.map { (name(of: $0), value(of: $0, accessory)) } + claimValues(claim)
    }

    /// The `a{sv}` of every property.
    static func dictionary(_ accessory: Accessory, claim: ClaimSummary?) -> BusValue {
        .vardict(all(accessory, claim: claim))
    }

    /// The one property `name`, or `nil` when there is none of that name.
    static func value(named name: String, _ accessory: Accessory, claim: ClaimSummary?) -> BusValue? {
        if let field = Accessory.Field.allCases.first(where: { Self.name(of: $0) == name }) {
            return value(of: field, accessory)
        }
        return claimValues(claim).first { $0.0 == name }?.1
    }

    /// The `a{sv}` of an event on a subscription (`Events`' struct `(sta{sv})`): the accessory's fields, without
    /// its claim (claims are the accessory objects' properties).
    static func event(_ event: AccessoryEvent) -> BusValue {
        .structure([
            .string(event.change.rawValue), .uint64(event.sequence),
            .vardict(Accessory.Field.allCases.map { (name(of: $0), value(of: $0, event.accessory)) }),
        ])
    }

    /// The `a{sv}` of an accessory in a subscription's `Snapshot`.
    static func fields(_ accessory: Accessory) -> BusValue {
        .vardict(Accessory.Field.allCases.map { (name(of: $0), value(of: $0, accessory)) })
    }

    // MARK: Written straight into a message (the bus thread's hot path: no tree of values in between)

    /// Appends the accessory's `a{sv}`: its fields, then with `withClaim` its claim's.
    static func write(_ accessory: Accessory, claim: ClaimSummary?, withClaim: Bool, into message: BusMessage)
        throws(SystemdBusError)
    {
        try message.container("a", "{sv}") { () throws(SystemdBusError) in
            for field in Accessory.Field.allCases { try message.appendEntry(name(of: field), value(of: field, accessory)) }
            guard withClaim else { return }
            for (name, value) in claimValues(claim) { try message.appendEntry(name, value) }
        }
    }

    /// Appends an accessory object's `a{sa{sv}}`: its one interface and its properties.
    static func writeInterfaces(_ accessory: Accessory, claim: ClaimSummary?, into message: BusMessage)
        throws(SystemdBusError)
    {
        try message.container("a", "{sa{sv}}") { () throws(SystemdBusError) in
            try message.container("e", "sa{sv}") { () throws(SystemdBusError) in
                try message.append(string: BusAPI.accessoryInterface)
                try write(accessory, claim: claim, withClaim: true, into: message)
            }
        }
    }

    /// Appends the `a(sta{sv})` of a subscription's `Events`.
    static func writeEvents(_ events: [AccessoryEvent], into message: BusMessage) throws(SystemdBusError) {
        try message.container("a", "(sta{sv})") { () throws(SystemdBusError) in
            for event in events {
                try message.container("r", "sta{sv}") { () throws(SystemdBusError) in
                    try message.append(string: event.change.rawValue)
                    try message.append(event.sequence, type: "t")
                    try write(event.accessory, claim: nil, withClaim: false, into: message)
                }
            }
        }
    }
}
