import AccmonDevices
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

@testable import AccmonUdev

/// accmond takes a USB device's manufacturer, product and serial from the properties udev's `usb_id` builtin sets
/// (``usbDeviceAttributes(fromProperties:)``) instead of reading sysfs, when they tell the text exactly. Random
/// devices, with the strings a device may report, go to the real builtin (`udevadm test-builtin usb_id` under
/// umockdev, through `Tests/umockdev/usb_id.py`); the accessory classified from its properties plus the attributes
/// still read must equal the one classified from every attribute read.
@Suite("USB strings from udev's usb_id properties agree with sysfs", .timeLimit(.minutes(2)))
struct UsbIdAgreementTests {
    struct Device: Codable {
        var manufacturer: String?
        var product: String?
        var serial: String?
    }

    @Test func randomDevicesClassifyAsFromTheirAttributes() throws {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        let devices = (0..<300).map { _ in
            Device(
                manufacturer: Self.randomText(&random), product: Self.randomText(&random),
                serial: Self.randomText(&random))
        }
        let answers = try ReferenceScript(name: "usb_id.py").udevProperties(devices)
        var fromProperties: [SysfsAttribute: Int] = [:]
        var cutByUdev = 0
        for (number, (device, properties)) in zip(devices, answers).enumerated() {
            let directory = try TemporaryDirectory()
            var files = ["idVendor": "1209", "idProduct": "0001", "bcdDevice": "0100", "bDeviceClass": "00"]
            files["manufacturer"] = device.manufacturer
            files["product"] = device.product
            files["serial"] = device.serial
            for (name, text) in files { try Data(text.utf8).write(to: URL(fileURLWithPath: directory.file(name))) }
            let sysfs = try #require(SysfsDirectory(directory.path))
            let taken = usbDeviceAttributes(fromProperties: properties)
            for property in [UdevProperty.vendorEncoded, .modelEncoded]
            where properties[property]?.utf8.count ?? 0 >= 253 {
                cutByUdev += 1
            }
            for attribute in [SysfsAttribute.manufacturer, .product, .serial] where taken[attribute] != nil {
                fromProperties[attribute, default: 0] += 1
            }
            func classified(_ attributes: SysfsAttributes) -> Classification {
                classifiedUSBDevice(number: number, properties: properties, attributes: attributes)
            }
            #expect(
                classified(sysfs.completingUSBDeviceAttributes(usbDeviceAttributes(fromProperties: properties)))
                    == classified(sysfs.attributes(SysfsAttribute.usbDevice)),
                "device \(device), usb_id's properties \(properties) (ACCMON_TEST_SEED=\(seed))")
        }
        // Not vacuous: most strings are taken from the properties (the rest are cut, missing or ambiguous), and udev
        // had to cut some.
        #expect(cutByUdev > 10, "only \(cutByUdev) encodings were cut by udev")
        for attribute in [SysfsAttribute.manufacturer, .product, .serial] {
            #expect(fromProperties[attribute, default: 0] > 50, "\(attribute) taken from udev \(fromProperties)")
        }
    }

    /// A string as a USB device may report it: often plain, else with spaces, punctuation, `\`, control characters,
    /// UTF-8, `_`; sometimes long enough that udev's encoding is cut; sometimes missing.
    static func randomText(_ random: inout SplitMix64) -> String? {
        if random.next(below: 10) == 0 { return nil }
        let plain = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789#+-.:=@")
        let odd: [Character] = [
            " ", " ", "_", "\\", "x", "/", ",", "!", "\"", "'", "(", "%", "\t", "\u{7F}", "é", "中", "😀",
        ]
        let long = random.next(below: 6) == 0
        let length = long ? 60 + Int(random.next(below: 67)) : 1 + Int(random.next(below: 24))
        let oddShare = long ? 3 + random.next(below: 7) : random.next(below: 3) == 0 ? 0 : random.next(below: 5)
        var text = ""
        for _ in 0..<length {
            text.append(
                random.next(below: 10) < oddShare
                    ? odd[Int(random.next(below: UInt64(odd.count)))]
                    : plain[Int(random.next(below: UInt64(plain.count)))])
        }
        return text
    }
}

extension UdevTests {
    @Suite("udev's usb_id properties")
    struct UsbIdProperties {
        @Test(
            "accmond announces a USB device's strings from udev's usb_id properties when they tell them, else from sysfs"
        )
        func stringsFromUsbIdProperties() async throws {
            let scenario = try await UdevScenario.begin()
            // usb_id runs on the attributes as created; then they change behind udev's back (no uevent), so the
            // announcement shows where accmond took each string from.
            let devices = [
                ("exact", ["manufacturer": "  Logi\\x/ tech ", "name": "USB  Optical Mouse", "serial": "AB-12"]),
                // udev's serial `A_1` may stand for `A 1`, and a cut encoding leaves both unreliable: from sysfs.
                (
                    "ambiguous",
                    ["manufacturer": String(repeating: "a b ", count: 70), "name": "Mouse", "serial": "A 1"]
                ),
            ]
            for (name, strings) in devices {
                var params: [String: Any] = strings
                params["usb_id"] = true
                try await scenario.harness.add("noserial", name, params: params, events: false)
                try await scenario.harness.set(
                    name, attributes: ["manufacturer": "Changed", "product": "Changed", "serial": "CHANGED"],
                    uevent: "add")
            }
            let accessories = try await scenario.next(2).map(\.accessory)
            #expect(
                accessories.map { [$0.manufacturer, $0.name, $0.serialNumber] } == [
                    ["Logi\\x/ tech", "USB  Optical Mouse", "AB-12"], ["Changed", "Changed", "CHANGED"],
                ], "\(scenario.report())")
        }

        @Test("with accmon's udev rules, accmond takes removable from ACCMON_REMOVABLE and reads only the descriptors")
        func onlyDescriptorsReadWithAccmonsRule() async throws {
            let scenario = try await UdevScenario.begin()
            // usb_id, PRODUCT and TYPE tell every other attribute. `ruled` and `unruled` become fixed behind udev's
            // back (no uevent): only the one without the rule's property reads that and is left out. `plain` reads
            // its files as before, and its descriptors' hash must be the one `ruled` read by the file's path.
            let devices: [(String, [String: Any])] = [
                ("ruled", ["usb_id": true, "serial": "R1", "properties": ["ACCMON_REMOVABLE": "removable"]]),
                ("unruled", ["usb_id": true, "serial": "U1"]),
                ("plain", ["usb_id": true, "serial": "P1"]),
            ]
            for (name, params) in devices {
                try await scenario.harness.add("noserial", name, params: params, events: false)
                try await scenario.harness.set(
                    name, attributes: name == "plain" ? [:] : ["removable": "fixed"], uevent: "add")
            }
            let accessories = try await scenario.next(2).map(\.accessory)
            #expect(accessories.map(\.serialNumber) == ["R1", "P1"], "\(scenario.report())")
            #expect(
                accessories.count == 2 && accessories[0].descriptorsSHA256.count == 64
                    && accessories[0].descriptorsSHA256 == accessories[1].descriptorsSHA256, "\(accessories)")
        }
    }
}

/// How the classifier takes the `add` of USB device `1-(number + 2)` with these properties and attributes. The
/// agreement suites classify each device twice, from udev's properties plus the files still read and from the files
/// alone, and compare.
func classifiedUSBDevice(number: Int, properties: UdevProperties, attributes: SysfsAttributes) -> Classification {
    DeviceClassifier.classify(
        DeviceRecord(
            action: "add", syspath: "/sys/devices/usb1/1-\(number + 2)", subsystem: "usb", devtype: "usb_device",
            devnode: "/dev/bus/usb/001/002", properties: properties, attributes: attributes))
}
