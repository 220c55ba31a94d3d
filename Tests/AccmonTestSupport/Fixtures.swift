public import AccmonProtocol

/// Sample values shared by the core tests.
public enum Fixtures {
    /// An accessory with every field set, none equal to its default (checked by `fullAccessoryFixtureSetsEveryField`).
    public static let fullAccessory = Accessory(
        kind: .serial, accessoryID: "serial:0403:6001:serial=A50285BI", connectionID: ConnectionID(42),
        name: "FT232R USB UART", manufacturer: "FTDI", modelNumber: "FT232R", serialNumber: "A50285BI",
        firmwareRevision: "6.00", hardwareRevision: "rev B", vendorID: "0403", productID: "6001",
        protocolStrings: ["com.ftdi.uart", "org.accmon.serial"],
        deviceNodes: ["/dev/ttyUSB0", "/dev/serial/by-id/usb-FTDI_FT232R_USB_UART_A50285BI-if00-port0"],
        sysfsPath: "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1.2", portPath: "1-1.2", interfaceNumber: "00",
        descriptorsSHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")

    /// An accessory whose strings need escaping in JSON: quotes, backslashes, control characters, non-ASCII.
    public static let awkwardAccessory = Accessory(
        kind: .bluetoothHID, accessoryID: #"id with "quotes" and \backslash\"#, connectionID: ConnectionID(UInt64.max),
        name: "Clavier \u{E9}l\u{E9}gant \u{1F3B9}", manufacturer: "Line\nbreak\tand tab", modelNumber: "nul\u{0}byte",
        serialNumber: "\u{2028}\u{2029}", firmwareRevision: "</script>", hardwareRevision: "\u{7F}",
        vendorID: "05ac", productID: "abcd", protocolStrings: ["", "a/b/c"], deviceNodes: ["/dev/input/event3"],
        sysfsPath: "/sys/devices/virtual/misc/uhid/0005:05AC:0265.0001", portPath: "", interfaceNumber: "\u{FEFF}")

    /// A USB accessory with only the required field set.
    public static let minimalAccessory = Accessory(kind: .usb)

    /// Request ids of each form, with the extremes.
    public static let requestIDs: [RequestID?] = [
        nil, .number(0), .number(7), .number(-1), .number(Int64.max), .number(Int64.min), .string(""),
        .string("req-1"), .string("42"), .string("\u{1F600} \"quoted\"\n"),
    ]

    /// Filters with each part alone, all parts, and none.
    public static let filters: [AccessoryFilter] = [
        .all,
        AccessoryFilter(kind: .usb),
        AccessoryFilter(kind: .serial),
        AccessoryFilter(kind: .bluetoothHID),
        AccessoryFilter(vendorID: "0403"),
        AccessoryFilter(productID: "6001"),
        AccessoryFilter(protocolString: "com.ftdi.uart"),
        AccessoryFilter(kind: .serial, vendorID: "403", productID: "60aF", protocolString: "org.accmon.serial"),
    ]

    /// Characters that strings on the wire must survive: every control character, the JSON specials, DEL, non-ASCII
    /// (U+2028 and an emoji among them), and plain ones.
    private static let awkwardAlphabet: [Unicode.Scalar] =
        (0..<0x20).map { Unicode.Scalar($0)! } + ["\"", "\\", "/", "\u{7F}", "é", "\u{2028}", "😀", "a", " "]

    /// A string of 0 to 12 characters from ``awkwardAlphabet``.
    public static func randomText(using random: inout SplitMix64) -> String {
        var value = ""
        for _ in 0..<Int.random(in: 0...12, using: &random) {
            value.unicodeScalars.append(awkwardAlphabet.randomElement(using: &random)!)
        }
        return value
    }

    /// An event whose every string is ``randomText(using:)``, with any connection id and sequence number, and a
    /// rejection half of the time.
    public static func randomEvent(using random: inout SplitMix64) -> AccessoryEvent {
        func text() -> String { randomText(using: &random) }
        func texts() -> [String] { (0..<Int.random(in: 0...3, using: &random)).map { _ in text() } }
        let accessory = Accessory(
            kind: AccessoryKind.allCases.randomElement(using: &random)!, accessoryID: text(),
            connectionID: ConnectionID(random.next()), name: text(), manufacturer: text(), modelNumber: text(),
            serialNumber: text(), firmwareRevision: text(), hardwareRevision: text(), vendorID: text(),
            productID: text(), protocolStrings: texts(), deviceNodes: texts(), sysfsPath: text(), portPath: text(),
            interfaceNumber: text(), descriptorsSHA256: text())
        return AccessoryEvent(
            Bool.random(using: &random) ? .connect : .disconnect, sequence: random.next(), accessory: accessory,
            rejection: Bool.random(using: &random) ? text() : nil)
    }
}

extension Fixtures {
    /// Characters clients usually send: letters, digits, punctuation, DEL and non-ASCII; nothing JSON escapes.
    private static let plainAlphabet: [Unicode.Scalar] = [
        "a", "Z", "0", " ", "-", "_", ".", ":", "/", "\u{7F}", "é", "ß", "中", "\u{2028}", "😀",
    ]

    /// A string of 0 to 12 characters from ``plainAlphabet`` or, half of the time, a ``randomText(using:)``.
    public static func randomRequestText(using random: inout SplitMix64) -> String {
        guard Bool.random(using: &random) else { return randomText(using: &random) }
        var value = ""
        for _ in 0..<Int.random(in: 0...12, using: &random) {
            value.unicodeScalars.append(plainAlphabet.randomElement(using: &random)!)
        }
        return value
    }

    /// A request id: absent, an integer (extremes among them), or a ``randomRequestText(using:)``.
    public static func randomRequestID(using random: inout SplitMix64) -> RequestID? {
        switch random.next(below: 6) {
        case 0: nil
        case 1: .number(Int64(bitPattern: random.next()))
        case 2: .number([0, 1, -1, Int64.max, Int64.min].randomElement(using: &random)!)
        case 3: .number(Int64.random(in: -1000...1000, using: &random))
        default: .string(randomRequestText(using: &random))
        }
    }

    /// A hex id of 1 to 4 digits in mixed case, or now and then one that is not (empty, too long, not hex).
    public static func randomHexID(using random: inout SplitMix64) -> String {
        switch random.next(below: 12) {
        case 0: ""
        case 1: "12345"
        case 2: randomRequestText(using: &random)
        default:
            String((0..<1 + random.next(below: 4)).map { _ in "0123456789abcdefABCDEF".randomElement(using: &random)! })
        }
    }

    /// A filter with each part set or not.
    public static func randomFilter(using random: inout SplitMix64) -> AccessoryFilter {
        AccessoryFilter(
            kind: Bool.random(using: &random) ? AccessoryKind.allCases.randomElement(using: &random)! : nil,
            vendorID: Bool.random(using: &random) ? randomHexID(using: &random) : nil,
            productID: Bool.random(using: &random) ? randomHexID(using: &random) : nil,
            protocolString: Bool.random(using: &random) ? randomRequestText(using: &random) : nil)
    }

    /// An accessory whose strings are ``randomRequestText(using:)`` or empty, with a derived or random accessory id and
    /// vendor and product ids from ``randomHexID(using:)``.
    public static func randomAccessory(using random: inout SplitMix64) -> Accessory {
        func text() -> String { Bool.random(using: &random) ? randomRequestText(using: &random) : "" }
        func texts() -> [String] { (0..<Int.random(in: 0...3, using: &random)).map { _ in text() } }
        return Accessory(
            kind: AccessoryKind.allCases.randomElement(using: &random)!,
            accessoryID: Bool.random(using: &random) ? text() : nil,
            connectionID: ConnectionID(Bool.random(using: &random) ? random.next() : 0), name: text(),
            manufacturer: text(), modelNumber: text(), serialNumber: text(), firmwareRevision: text(),
            hardwareRevision: text(), vendorID: randomHexID(using: &random), productID: randomHexID(using: &random),
            protocolStrings: texts(), deviceNodes: texts(), sysfsPath: text(), portPath: text(),
            interfaceNumber: text(), descriptorsSHA256: text())
    }

    /// A client message of any request type, with a ``randomRequestID(using:)``.
    public static func randomClientMessage(using random: inout SplitMix64) -> ClientMessage {
        let request: ClientRequest
        switch random.next(below: 11) {
        case 0:
            let versions = (0..<random.next(below: 4)).map { _ in
                Bool.random(using: &random)
                    ? Int.random(in: -2...3, using: &random) : Int(bitPattern: UInt(random.next()))
            }
            request = .hello(
                versions: versions, clientName: randomRequestText(using: &random),
                restoreID: Bool.random(using: &random) ? randomRequestText(using: &random) : nil,
                relaunch: Bool.random(using: &random) ? randomRequestText(using: &random) : nil)
        case 1: request = .subscribe(randomFilter(using: &random), includeRejected: Bool.random(using: &random))
        case 2: request = .list(randomFilter(using: &random), includeRejected: Bool.random(using: &random))
        case 3: request = .unsubscribe
        case 4: request = .suspend
        case 5: request = .resume
        case 6: request = .acknowledge(Bool.random(using: &random) ? random.next() : random.next(below: 100))
        case 7: request = .reloadManifest
        case 8: request = .status
        case 9: request = .simulateConnect(randomAccessory(using: &random))
        default:
            request = .simulateDisconnect(
                ConnectionID(Bool.random(using: &random) ? random.next() : random.next(below: 100)))
        }
        return ClientMessage(id: randomRequestID(using: &random), request)
    }
}

extension Fixtures {
    /// A party of each form: local with every field, local with none of the optional ones, remote.
    public static let parties: [Party] = [
        Party(user: "alice", uid: 1000, pid: 4242, client: "accmon"),
        Party(user: "", uid: 0),
        Party(user: "ci \"bot\"\n", remote: true),
        Party(user: "bob", uid: UInt32.max, pid: -1, client: ""),
    ]

    /// A history entry of any kind, with a random accessory (``randomEvent(using:)``'s), random optional fields, and
    /// a time of any magnitude.
    public static func randomHistoryEntry(using random: inout SplitMix64) -> HistoryEntry {
        let times: [Double] = [
            0, 1_796_000_000.123, 1_796_000_000, 1_764_500_123.456789, 1e-7, 1e16, 1e300, -3.5,
            Double(random.next() >> 11) / 1000,
        ]
        func maybe<T>(_ value: @autoclosure () -> T) -> T? { Bool.random(using: &random) ? value() : nil }
        let event = randomEvent(using: &random)
        return HistoryEntry(
            seq: random.next(), time: times.randomElement(using: &random)!,
            kind: HistoryEntry.Kind.allCases.randomElement(using: &random)!, accessory: event.accessory,
            eventSeq: maybe(random.next()), actor: maybe(parties.randomElement(using: &random)!),
            holder: maybe(parties.randomElement(using: &random)!), reason: maybe(randomText(using: &random)))
    }
}
