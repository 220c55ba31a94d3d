import AccmonCrypto
import AccmonDevices
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

@testable import AccmonUdev

/// accmond reads a device's sysfs attributes itself (one `openat` each) instead of through libudev's accessor; the
/// values must be what libudev gives. The udev suites check the whole path under umockdev; these pin the edge cases
/// on plain files, which is what sysfs attributes look like to `open` and `read`.
@Suite("sysfs attributes read from the device's directory")
struct SysfsDirectoryTests {
    @Test func valuesLoseTrailingNewlinesAndStopAtTheFirstNUL() throws {
        let directory = try TemporaryDirectory()
        try Data("1209\n".utf8).write(to: URL(fileURLWithPath: directory.file("idVendor")))
        try Data("Big Board \r\n\n".utf8).write(to: URL(fileURLWithPath: directory.file("product")))
        try Data([0x41, 0x42, 0x00, 0x43, 0x0A]).write(to: URL(fileURLWithPath: directory.file("serial")))
        try Data([0x66, 0xFF, 0x6F]).write(to: URL(fileURLWithPath: directory.file("manufacturer")))
        try Data().write(to: URL(fileURLWithPath: directory.file("removable")))
        let sysfs = try #require(SysfsDirectory(directory.path))
        #expect(
            sysfs.attributes([.idVendor, .product, .serial, .manufacturer, .removable, .bcdDevice]) == [
                .idVendor: "1209", .product: "Big Board ", .serial: "AB", .manufacturer: "f\u{FFFD}o",
                .removable: "",
            ])
    }

    @Test func aPageAtMostAndNeitherSymlinksNorDirectories() throws {
        let directory = try TemporaryDirectory()
        try Data(String(repeating: "x", count: 10_000).utf8).write(to: URL(fileURLWithPath: directory.file("long")))
        try FileManager.default.createSymbolicLink(atPath: directory.file("link"), withDestinationPath: "long")
        try FileManager.default.createDirectory(atPath: directory.file("power"), withIntermediateDirectories: false)
        let sysfs = try #require(SysfsDirectory(directory.path))
        #expect(sysfs.text("long")?.utf8.count == 4096)
        #expect(sysfs.text("link") == nil)
        #expect(sysfs.text("power") == nil)
        #expect(SysfsDirectory(directory.file("gone")) == nil)
        #expect(SysfsDirectory(directory.file("long")) == nil)
    }

    @Test func aUSBDevicesIdsComeFromItsUeventWhenItCarriesThem() throws {
        let directory = try TemporaryDirectory()
        for (name, value) in [
            "serial": "A50285BI\n", "manufacturer": "FTDI\n", "product": "FT232R USB UART\n",
            "removable": "removable\n",
            "idVendor": "1209\n", "idProduct": "0001\n", "bcdDevice": "0100\n", "bDeviceClass": "ff\n",
        ] {
            try Data(value.utf8).write(to: URL(fileURLWithPath: directory.file(name)))
        }
        let sysfs = try #require(SysfsDirectory(directory.path))
        func expected(_ vendor: String, _ product: String, _ device: String, _ deviceClass: String) -> SysfsAttributes {
            [
                .serial: "A50285BI", .manufacturer: "FTDI", .product: "FT232R USB UART", .removable: "removable",
                .idVendor: vendor, .idProduct: product, .bcdDevice: device, .bDeviceClass: deviceClass,
            ]
        }
        // The ids from PRODUCT and TYPE, the rest from the files (which here disagree, to tell the two apart).
        #expect(
            sysfs.completingUSBDeviceAttributes(
                usbDeviceAttributes(fromProperties: [.product: "403/6001/600", .type: "0/0/0"]))
                == expected("0403", "6001", "0600", "00"))
        // Without them (or malformed), every attribute from its file.
        #expect(
            sysfs.completingUSBDeviceAttributes(
                usbDeviceAttributes(fromProperties: [.product: "SYNC/0/0", .type: "0/0/0"]))
                == expected("1209", "0001", "0100", "ff"))
    }

    /// When the properties tell every attribute, only `descriptors` is read (by its path); otherwise the directory's
    /// files fill in the rest. A device whose directory is gone keeps what its properties tell, with no hash.
    @Test func aUSBDeviceWhosePropertiesTellEverythingReadsItsDescriptorsOnly() throws {
        let directory = try TemporaryDirectory()
        for (name, value) in ["removable": "fixed\n", "bDeviceClass": "ff\n", "serial": "FILE\n"] {
            try Data(value.utf8).write(to: URL(fileURLWithPath: directory.file(name)))
        }
        let descriptors: [UInt8] = [0x12, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x40]
        try Data(descriptors).write(to: URL(fileURLWithPath: directory.file("descriptors")))
        let hash = try SHA256.hexDigest(descriptors)
        let everything: UdevProperties = [
            .product: "1209/1/100", .type: "0/0/0", .vendorEncoded: "accmon", .vendor: "accmon",
            .modelEncoded: "Board", .model: "Board", .serialShort: "S1", .accmonRemovable: "removable",
        ]
        let told = usbDeviceAttributes(fromProperties: everything)
        #expect(SysfsAttribute.usbDevice.allSatisfy { told[$0] != nil }, "\(told)")
        let fromProperties = SysfsDirectory.usbDevice(at: directory.path, properties: everything)
        #expect(fromProperties.attributes == told && fromProperties.descriptorsSHA256 == hash)
        // Without ACCMON_REMOVABLE, `removable` comes from its file (which here disagrees, to tell them apart).
        var withoutRule = everything
        withoutRule[.accmonRemovable] = nil
        let read = SysfsDirectory.usbDevice(at: directory.path, properties: withoutRule)
        #expect(read.attributes[.removable] == "fixed" && read.attributes[.serial] == "S1")
        #expect(read.descriptorsSHA256 == hash)
        let gone = directory.file("gone")
        #expect(SysfsDirectory.usbDevice(at: gone, properties: everything) == (told, ""))
        #expect(
            SysfsDirectory.usbDevice(at: gone, properties: withoutRule) == (
                usbDeviceAttributes(fromProperties: withoutRule), ""
            ))
    }

    @Test func theDescriptorsHashCoversEveryByte() throws {
        let directory = try TemporaryDirectory()
        var bytes: [UInt8] = []
        var random = SplitMix64(seed: 7)
        for _ in 0..<9_000 { bytes.append(UInt8(truncatingIfNeeded: random.next())) }
        bytes[3] = 0  // binary: a NUL must not end it
        try Data(bytes).write(to: URL(fileURLWithPath: directory.file("descriptors")))
        let sysfs = try #require(SysfsDirectory(directory.path))
        #expect(sysfs.descriptorsHash() == (try SHA256.hexDigest(bytes)))
        #expect(try #require(SysfsDirectory(directory.file("."))).descriptorsHash() == sysfs.descriptorsHash())
        try FileManager.default.removeItem(atPath: directory.file("descriptors"))
        #expect(sysfs.descriptorsHash() == "")
    }
    /// A file as `pread` sees it: `pageLimited` hands over at most a page per call, as sysfs (kernfs) does, else all
    /// that fits, as a regular file does. Counts the calls.
    final class FakeFile {
        let bytes: [UInt8]
        let pageLimited: Bool
        var calls = 0

        init(count: Int, pageLimited: Bool) {
            var random = SplitMix64(seed: UInt64(count))
            bytes = (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            self.pageLimited = pageLimited
        }

        func read(into room: UnsafeMutableBufferPointer<UInt8>, at offset: Int) -> Int? {
            calls += 1
            let count = max(0, min(room.count, bytes.count - offset, pageLimited ? SysfsDirectory.pageBytes : .max))
            for index in 0..<count { room[index] = bytes[offset + index] }
            return count
        }
    }

    @Test(arguments: [true, false])
    func aBinaryFileIsReadWholeWithoutTheReadThatFindsItsEnd(pageLimited: Bool) {
        // (size, reads): a read shorter than a page and its room ends it; a full one may have more behind it.
        for (size, reads) in [
            (0, 1), (43, 1), (4095, 1), (4096, 2), (9_000, pageLimited ? 3 : 2), (12_288, pageLimited ? 4 : 2),
            (65_536, pageLimited ? 16 : 1), (70_000, pageLimited ? 16 : 1),
        ] {
            let file = FakeFile(count: size, pageLimited: pageLimited)
            var buffer = [UInt8](repeating: 0, count: 65_536)
            let count = buffer.withUnsafeMutableBufferPointer { buffer in
                SysfsDirectory.fill(buffer, wholeInOneRead: false) { file.read(into: $0, at: $1) }
            }
            #expect(count == min(size, 65_536), "\(size) bytes")
            #expect(Array(buffer[..<(count ?? 0)]) == Array(file.bytes.prefix(65_536)), "\(size) bytes")
            #expect(file.calls == reads, "\(size) bytes")
        }
    }

    @Test func aTextAttributeIsOneReadAndAFailedReadIsNoValue() {
        let file = FakeFile(count: 9_000, pageLimited: true)
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBufferPointer { buffer in
            SysfsDirectory.fill(buffer, wholeInOneRead: true) { file.read(into: $0, at: $1) }
        }
        #expect(count == 4096)
        #expect(file.calls == 1)
        var reads = 0
        var larger = [UInt8](repeating: 0, count: 65_536)
        let failed = larger.withUnsafeMutableBufferPointer { buffer in
            SysfsDirectory.fill(buffer, wholeInOneRead: false) { _, _ in
                reads += 1
                return reads == 1 ? 4096 : nil
            }
        }
        #expect(failed == nil)
    }
}
