import AccmonTestSupport
import Testing

@testable import AccmonCore

/// The accessory id and the firmware revision are built byte by byte on every device event's path; they must equal
/// the plain forms below, written with string interpolation.
@Suite("Derived accessory fields")
struct DerivedFieldTests {
    static func referenceID(_ accessory: Accessory) -> String {
        var id = "\(accessory.kind.rawValue):\(accessory.usbID)"
        if !accessory.serialNumber.isEmpty {
            id += ":serial=\(accessory.serialNumber)"
        } else if !accessory.portPath.isEmpty {
            id += ":port=\(accessory.portPath)"
        } else if !accessory.sysfsPath.isEmpty {
            id += ":sysfs=\(accessory.sysfsPath)"
        }
        if !accessory.interfaceNumber.isEmpty { id += ":if=\(accessory.interfaceNumber)" }
        return id
    }

    static func referenceRevision(_ bcd: String) -> String {
        let digits = Array(bcd.utf8)
        guard digits.count == 4, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return bcd }
        let major = digits[0] == UInt8(ascii: "0") ? digits[1...1] : digits[0...1]
        return String(decoding: major + [UInt8(ascii: ".")] + digits[2...3], as: UTF8.self)
    }

    @Test func accessoryIDsEqualTheInterpolatedForm() {
        var random = SplitMix64(seed: SplitMix64.testSeed())
        func pick(_ values: [String]) -> String { values[Int(random.next(below: UInt64(values.count)))] }
        for _ in 0..<3_000 {
            let accessory = Accessory(
                kind: AccessoryKind.allCases[Int(random.next(below: UInt64(AccessoryKind.allCases.count)))],
                serialNumber: pick(["", "A50285BI", "é€ 1", String(repeating: "s", count: 300)]),
                vendorID: pick(["", "1209", "05ac"]), productID: pick(["", "a000", "0267"]),
                sysfsPath: pick(["", "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-2"]),
                portPath: pick(["", "1-1.2"]), interfaceNumber: pick(["", "00", "01"]))
            #expect(accessory.derivedAccessoryID == Self.referenceID(accessory), "\(accessory)")
            #expect(accessory.accessoryID == accessory.derivedAccessoryID)
        }
    }

    @Test func revisionsEqualThePlainForm() {
        for number in 0..<10_000 {
            let bcd = String(repeating: "0", count: 4 - String(number).count) + String(number)
            #expect(DeviceClassifier.revision(bcd) == Self.referenceRevision(bcd), "\(bcd)")
        }
        var random = SplitMix64(seed: SplitMix64.testSeed())
        let alphabet = Array("0109a.é ".unicodeScalars)
        for _ in 0..<5_000 {
            let text = String(
                String.UnicodeScalarView(
                    (0..<Int(random.next(below: 6))).map { _ in alphabet[Int(random.next(below: UInt64(alphabet.count)))] }
                ))
            #expect(DeviceClassifier.revision(text) == Self.referenceRevision(text), "\(text.debugDescription)")
        }
    }
}
