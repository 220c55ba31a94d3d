import AccmonProtocol
import AccmonTestSupport
import Testing

@testable import AccmonDevices

/// The `usb_device` attributes taken from the device's properties instead of sysfs reads: the kernel's `PRODUCT` and
/// `TYPE`, and udev's `ID_VENDOR_ENC`, `ID_MODEL_ENC` and `ID_SERIAL_SHORT` when they tell the text exactly.
/// (`UsbIdAgreementTests` checks the udev ones against the real `usb_id` builtin.)
@Suite("usb_device attributes from the device's properties")
struct PropertyAttributesTests {
    @Test func theKernelsFormatsBecomeTheAttributeFilesFormats() {
        #expect(
            usbDeviceAttributes(fromProperties: [.product: "403/6001/600", .type: "0/0/0"]) == [
                .idVendor: "0403", .idProduct: "6001", .bcdDevice: "0600", .bDeviceClass: "00",
            ])
        #expect(
            usbDeviceAttributes(fromProperties: [.product: "1d6b/2/601", .type: "9/0/1"]) == [
                .idVendor: "1d6b", .idProduct: "0002", .bcdDevice: "0601", .bDeviceClass: "09",
            ])
        #expect(
            usbDeviceAttributes(fromProperties: [.product: "ffff/0/ffff", .type: "255/255/255"]) == [
                .idVendor: "ffff", .idProduct: "0000", .bcdDevice: "ffff", .bDeviceClass: "ff",
            ])
    }

    /// Whatever the descriptor says, formatting it as the kernel does and reading it back gives what sysfs shows.
    @Test func randomDescriptorsRoundTrip() {
        var random = SplitMix64(seed: SplitMix64.testSeed())
        func hex(_ value: UInt64, _ digits: Int) -> String {
            let text = String(value, radix: 16)
            return String(repeating: "0", count: digits - text.count) + text
        }
        for _ in 0..<2_000 {
            let (vendor, product, device) = (
                random.next(below: 0x10000), random.next(below: 0x10000), random.next(below: 0x10000)
            )
            let deviceClass = random.next(below: 0x100)
            let properties: UdevProperties = [
                .product: "\(String(vendor, radix: 16))/\(String(product, radix: 16))/\(String(device, radix: 16))",
                .type: "\(deviceClass)/\(random.next(below: 0x100))/\(random.next(below: 0x100))",
            ]
            let expected: SysfsAttributes = [
                .idVendor: hex(vendor, 4), .idProduct: hex(product, 4), .bcdDevice: hex(device, 4),
                .bDeviceClass: hex(deviceClass, 2),
            ]
            #expect(usbDeviceAttributes(fromProperties: properties) == expected, "\(properties)")
        }
    }

    /// udev's strings when they are exact: encoded names that agree with the plain ones, and a serial that udev
    /// cannot have changed (no `_`).
    @Test func udevsStringsWhenTheyAreExact() {
        #expect(
            usbDeviceAttributes(fromProperties: [
                .vendorEncoded: "FTDI", .modelEncoded: "FT232R\\x20USB\\x20UART", .serialShort: "A50285BI",
                .vendor: "FTDI", .model: "FT232R_USB_UART",
            ]) == [.manufacturer: "FTDI", .product: "FT232R USB UART", .serial: "A50285BI"])
        #expect(
            usbDeviceAttributes(fromProperties: [
                .vendorEncoded: "\\x20\\x20Foo\\x20\\x20Inc\\x5cx\\x2f\\x09é\\x20", .vendor: "Foo_Inc\\x__é",
            ]) == [.manufacturer: "  Foo  Inc\\x/\té "])
        // A `_` may stand for spaces or other bytes; an encoding with a raw space is not udev's: nothing from either.
        #expect(
            usbDeviceAttributes(fromProperties: [
                .serialShort: "AB_12", .vendorEncoded: "Future Technology", .vendor: "Future_Technology",
            ]) == [:])
        // An encoding that disagrees with the plain name, or without one, is not trusted.
        #expect(usbDeviceAttributes(fromProperties: [.vendorEncoded: "", .vendor: "kk8oQEI"]) == [:])
        #expect(usbDeviceAttributes(fromProperties: [.vendorEncoded: "FTDI"]) == [:])
        // Nor one whose plain form only begins with the plain name, or is only its beginning.
        #expect(usbDeviceAttributes(fromProperties: [.vendorEncoded: "FTDI\\x20Ltd", .vendor: "FTDI"]) == [:])
        #expect(usbDeviceAttributes(fromProperties: [.vendorEncoded: "FTDI", .vendor: "FTDI_Ltd"]) == [:])
        // The plain name holds what udev made of the first 63 bytes (here its `_` for the last space is not written);
        // a longer encoded one is checked against that.
        let long = String(repeating: "ab ", count: 30)
        #expect(
            usbDeviceAttributes(fromProperties: [
                .modelEncoded: long.map { $0 == " " ? "\\x20" : String($0) }.joined(),
                .model: String(repeating: "ab_", count: 20) + "ab",
            ]) == [.product: long])
        // When one encoding may have been cut, neither is trusted.
        #expect(
            usbDeviceAttributes(fromProperties: [
                .vendorEncoded: "FTDI", .vendor: "FTDI", .modelEncoded: String(repeating: "\\x20", count: 64),
                .model: "",
            ]) == [:])
    }

    /// accmon's udev rule hands over `removable` (udev-rules/70-accmon.rules); udev's empty value for a missing
    /// attribute leaves it to sysfs.
    @Test func removableFromAccmonsRule() {
        for value in ["removable", "fixed", "unknown"] {
            #expect(usbDeviceAttributes(fromProperties: [.accmonRemovable: value]) == [.removable: value])
        }
        #expect(usbDeviceAttributes(fromProperties: [.accmonRemovable: ""]) == [:])
        #expect(usbDeviceAttributes(fromProperties: [.serialShort: "A1"]) == [.serial: "A1"])
    }

    /// Anything but the kernel's exact form gives no ids: the source then reads them from sysfs.
    @Test(
        arguments: [
            [:], [.product: "403/6001/600"], [.type: "0/0/0"],
            [.product: "SYNC/0/0", .type: "0/0/0"], [.product: "403/6001", .type: "0/0/0"],
            [.product: "403/6001/600/1", .type: "0/0/0"], [.product: "10403/6001/600", .type: "0/0/0"],
            [.product: "-403/6001/600", .type: "0/0/0"], [.product: "+403/6001/600", .type: "0/0/0"],
            [.product: "403//600", .type: "0/0/0"], [.product: " 403/6001/600", .type: "0/0/0"],
            [.product: "403/6001/600", .type: "a/0/0"], [.product: "403/6001/600", .type: "256/0/0"],
            [.product: "403/6001/600", .type: "0/0"], [.product: "٤03/6001/600", .type: "0/0/0"],
            [.product: "ABCD/6001/600", .type: "0/0/0"], [.product: "403/6001/600/", .type: "0/0/0"],
        ] as [UdevProperties])
    func malformedPropertiesGiveNothing(properties: UdevProperties) {
        #expect(usbDeviceAttributes(fromProperties: properties) == [:])
    }
}

/// udev's `…_ENC` encoding (`encode_devnode_name`) read back.
@Suite("udev's encoded strings")
struct DecodedUdevStringTests {
    @Test func escapesAreReadBack() {
        #expect(decodedUdevString("Bench\\x20Device") == "Bench Device")
        #expect(decodedUdevString("\\x20\\x20Foo\\x20Inc\\x5cx\\x2f\\x20é\\x20") == "  Foo Inc\\x/ é ")
        #expect(decodedUdevString("a\\x09b\\x7f") == "a\tb\u{7F}")
        #expect(decodedUdevString("1209") == "1209")
        #expect(decodedUdevString("") == "")
        #expect(decodedUdevString("A#+-.:=@_z") == "A#+-.:=@_z")
        // Invalid UTF-8 is repaired as a sysfs read repairs it; trailing newlines go, as they do from a sysfs read.
        #expect(decodedUdevString("f\\xffo") == "f\u{FFFD}o")
        #expect(decodedUdevString("ab\\x0a\\x0d") == "ab")
    }

    /// What udev's encoder cannot have written, or may have cut, is refused: the source then reads sysfs.
    @Test(
        arguments: [
            "Bench Device", "a\\", "a\\x", "a\\x2", "a\\X20", "a\\x2G", "a\\x2F", "a\\y20", "\\x41", "\\x5f",
            "a\\x00b", "a/b", "a,b", "a\tb", String(repeating: "a", count: 253), String(repeating: "\\x20", count: 64),
        ])
    func whatUdevCannotHaveWrittenIsRefused(encoded: String) {
        #expect(decodedUdevString(encoded) == nil)
    }

    @Test func theLongestUncutEncodingIsRead() {
        #expect(decodedUdevString(String(repeating: "a", count: 252)) == String(repeating: "a", count: 252))
        #expect(decodedUdevString(String(repeating: "\\x20", count: 63)) == String(repeating: " ", count: 63))
    }

    /// Random text, encoded as udev encodes it (`encode_devnode_name`, into 256 bytes), reads back whole, or is
    /// refused when udev's buffer cut it.
    @Test func randomTextRoundTrips() {
        var random = SplitMix64(seed: SplitMix64.testSeed())
        let pool: [Character] = Array("Az09#+-.:=@_ \\x/,!\"'\t\u{7F}é中😀")
        var cut = 0
        for _ in 0..<3_000 {
            let length = Int(random.next(below: random.next(below: 4) == 0 ? 130 : 30))
            let text = String((0..<length).map { _ in pool[Int(random.next(below: UInt64(pool.count)))] })
            let (encoded, complete) = Self.udevEncoded(text)
            // A whole encoding of 253 bytes or more cannot be told from a cut one: refused too.
            if complete && encoded.utf8.count < 253 {
                #expect(decodedUdevString(encoded) == text, "\(text.debugDescription) as \(encoded.debugDescription)")
            } else {
                cut += 1
                #expect(
                    decodedUdevString(encoded) == nil, "\(text.debugDescription) cut to \(encoded.debugDescription)")
            }
        }
        #expect(cut > 50, "only \(cut) texts were too long for udev's buffer")
    }

    /// `text` as udev's `encode_devnode_name` writes it into its 256-byte buffer, and whether it fitted (when a
    /// piece does not fit, udev stops there).
    static func udevEncoded(_ text: String) -> (String, complete: Bool) {
        let kept = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789#+-.:=@_".utf8)
        var out: [UInt8] = []
        for scalar in text.unicodeScalars {
            let bytes = Array(String(scalar).utf8)
            let piece =
                bytes.count > 1 || kept.contains(bytes[0])
                ? bytes : Array(("\\x" + String(bytes[0], radix: 16).leftPadded(to: 2)).utf8)
            guard 256 - out.count >= piece.count else { return (String(decoding: out, as: UTF8.self), false) }
            out += piece
        }
        return (String(decoding: out, as: UTF8.self), out.count < 256)
    }
}

extension String {
    fileprivate func leftPadded(to count: Int) -> String {
        String(repeating: "0", count: max(0, count - self.count)) + self
    }
}
