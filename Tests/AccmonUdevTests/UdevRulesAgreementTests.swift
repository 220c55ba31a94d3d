import AccmonDevices
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

@testable import AccmonUdev

/// accmond takes a USB device's `removable` from `ACCMON_REMOVABLE`, which accmon's own udev rule sets
/// (udev-rules/70-accmon.rules), instead of reading the file again. The rules run in real udev (`udevadm test` under
/// umockdev, with accmon's rules only, through `Tests/umockdev/udev_rules.py`) on devices with each value the kernel
/// writes, with the file's newline and without the file; the accessory classified from udev's properties plus the
/// attributes still read must equal the one classified from every attribute read, and the attribute must come from
/// udev whenever the file exists.
@Suite("removable from accmon's udev rule agrees with sysfs", .timeLimit(.minutes(2)))
struct UdevRulesAgreementTests {
    struct Device: Codable {
        var removable: String?
        var bDeviceClass: String
    }

    @Test func removableFromTheRuleClassifiesAsFromTheFile() throws {
        let devices = [
            Device(removable: "removable\n", bDeviceClass: "00"), Device(removable: "fixed\n", bDeviceClass: "00"),
            Device(removable: "unknown\n", bDeviceClass: "00"), Device(removable: "fixed", bDeviceClass: "00"),
            Device(removable: nil, bDeviceClass: "00"), Device(removable: "removable\n", bDeviceClass: "09"),
        ]
        let answers = try ReferenceScript(name: "udev_rules.py").udevProperties(devices)
        var outcomes: [String] = []
        for (number, (device, properties)) in zip(devices, answers).enumerated() {
            let directory = try TemporaryDirectory()
            var files = [
                "idVendor": "1209", "idProduct": "0001", "bcdDevice": "0100", "bDeviceClass": device.bDeviceClass,
            ]
            files["removable"] = device.removable
            for (name, text) in files { try Data(text.utf8).write(to: URL(fileURLWithPath: directory.file(name))) }
            let sysfs = try #require(SysfsDirectory(directory.path))
            let taken = usbDeviceAttributes(fromProperties: properties)[.removable]
            let expected = device.removable.map { $0.hasSuffix("\n") ? String($0.dropLast()) : $0 }
            #expect(taken == expected, "device \(device): udev's properties \(properties)")
            func classified(_ attributes: SysfsAttributes) -> Classification {
                classifiedUSBDevice(number: number, properties: properties, attributes: attributes)
            }
            let fromProperties = classified(
                sysfs.completingUSBDeviceAttributes(usbDeviceAttributes(fromProperties: properties)))
            #expect(
                fromProperties == classified(sysfs.attributes(SysfsAttribute.usbDevice)),
                "device \(device): udev's properties \(properties)")
            switch fromProperties {
            case .accessory: outcomes.append("accessory")
            case .ignored(let reason): outcomes.append(reason)
            default: outcomes.append("\(fromProperties)")
            }
        }
        // Not vacuous: the devices classify differently.
        #expect(
            outcomes == [
                "accessory", "an internal (non-removable) device", "accessory", "an internal (non-removable) device",
                "accessory", "a hub",
            ])
    }
}
