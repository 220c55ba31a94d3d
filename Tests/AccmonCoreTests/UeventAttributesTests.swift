import AccmonCore
import AccmonTestSupport
import Testing

/// The `usb_device` attributes taken from the uevent's `PRODUCT` and `TYPE` instead of four sysfs reads.
@Suite("usb_device attributes from the uevent")
struct UeventAttributesTests {
    @Test func theKernelsFormatsBecomeTheAttributeFilesFormats() {
        #expect(
            usbDeviceAttributes(fromUeventProperties: [.product: "403/6001/600", .type: "0/0/0"]) == [
                .idVendor: "0403", .idProduct: "6001", .bcdDevice: "0600", .bDeviceClass: "00",
            ])
        #expect(
            usbDeviceAttributes(fromUeventProperties: [.product: "1d6b/2/601", .type: "9/0/1"]) == [
                .idVendor: "1d6b", .idProduct: "0002", .bcdDevice: "0601", .bDeviceClass: "09",
            ])
        #expect(
            usbDeviceAttributes(fromUeventProperties: [.product: "ffff/0/ffff", .type: "255/255/255"]) == [
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
            #expect(usbDeviceAttributes(fromUeventProperties: properties) == expected, "\(properties)")
        }
    }

    /// Anything but the kernel's exact form gives nothing: the source then reads every attribute from sysfs.
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
        #expect(usbDeviceAttributes(fromUeventProperties: properties) == [:])
    }
}
