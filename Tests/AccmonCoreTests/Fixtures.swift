import AccmonCore
import AccmonTestSupport

/// Sample values shared by the core tests.
enum Fixtures {
    /// An accessory with every field set, none equal to its default (checked by `fullAccessoryFixtureSetsEveryField`).
    static let fullAccessory = Accessory(
        kind: .serial, accessoryID: "serial:0403:6001:serial=A50285BI", connectionID: ConnectionID(42),
        name: "FT232R USB UART", manufacturer: "FTDI", modelNumber: "FT232R", serialNumber: "A50285BI",
        firmwareRevision: "6.00", hardwareRevision: "rev B", vendorID: "0403", productID: "6001",
        protocolStrings: ["com.ftdi.uart", "org.accmon.serial"],
        deviceNodes: ["/dev/ttyUSB0", "/dev/serial/by-id/usb-FTDI_FT232R_USB_UART_A50285BI-if00-port0"],
        sysfsPath: "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-1/1-1.2", portPath: "1-1.2", interfaceNumber: "00",
        descriptorsSHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08")

    /// An accessory whose strings need escaping in JSON: quotes, backslashes, control characters, non-ASCII.
    static let awkwardAccessory = Accessory(
        kind: .bluetoothHID, accessoryID: #"id with "quotes" and \backslash\"#, connectionID: ConnectionID(UInt64.max),
        name: "Clavier \u{E9}l\u{E9}gant \u{1F3B9}", manufacturer: "Line\nbreak\tand tab", modelNumber: "nul\u{0}byte",
        serialNumber: "\u{2028}\u{2029}", firmwareRevision: "</script>", hardwareRevision: "\u{7F}",
        vendorID: "05ac", productID: "abcd", protocolStrings: ["", "a/b/c"], deviceNodes: ["/dev/input/event3"],
        sysfsPath: "/sys/devices/virtual/misc/uhid/0005:05AC:0265.0001", portPath: "", interfaceNumber: "\u{FEFF}")

    /// A USB accessory with only the required field set.
    static let minimalAccessory = Accessory(kind: .usb)

    /// Request ids of each form, with the extremes.
    static let requestIDs: [RequestID?] = [
        nil, .number(0), .number(7), .number(-1), .number(Int64.max), .number(Int64.min), .string(""),
        .string("req-1"), .string("42"), .string("\u{1F600} \"quoted\"\n"),
    ]

    /// Filters with each part alone, all parts, and none.
    static let filters: [AccessoryFilter] = [
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
    static func randomText(using random: inout SplitMix64) -> String {
        var value = ""
        for _ in 0..<Int.random(in: 0...12, using: &random) {
            value.unicodeScalars.append(awkwardAlphabet.randomElement(using: &random)!)
        }
        return value
    }

    /// An event whose every string is ``randomText(using:)``, with any connection id and sequence number, and a
    /// rejection half of the time.
    static func randomEvent(using random: inout SplitMix64) -> AccessoryEvent {
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
    static func randomRequestText(using random: inout SplitMix64) -> String {
        guard Bool.random(using: &random) else { return randomText(using: &random) }
        var value = ""
        for _ in 0..<Int.random(in: 0...12, using: &random) {
            value.unicodeScalars.append(plainAlphabet.randomElement(using: &random)!)
        }
        return value
    }

    /// A request id: absent, an integer (extremes among them), or a ``randomRequestText(using:)``.
    static func randomRequestID(using random: inout SplitMix64) -> RequestID? {
        switch random.next(below: 6) {
        case 0: nil
        case 1: .number(Int64(bitPattern: random.next()))
        case 2: .number([0, 1, -1, Int64.max, Int64.min].randomElement(using: &random)!)
        case 3: .number(Int64.random(in: -1000...1000, using: &random))
        default: .string(randomRequestText(using: &random))
        }
    }
}
