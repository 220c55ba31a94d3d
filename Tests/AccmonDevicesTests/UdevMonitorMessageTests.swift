import AccmonDevices
import AccmonProtocol
import AccmonTestSupport
import Testing

/// accmond's parser of udevd's monitor datagrams. The udev suite compares it with the real libudev on thousands of
/// random datagrams (MonitorMessageAgreementTests); these pin each rule, as libudev 252 was seen to apply it.
@Suite("udev monitor messages")
struct UdevMonitorMessageTests {
    /// A datagram as udevd sends it: the header, then the entries each followed by a NUL.
    static func datagram(
        _ entries: [String], magic: UInt32 = UdevMonitorMessage.magic, prefix: String = "libudev", offset: UInt32 = 40
    ) -> [UInt8] {
        let block: [UInt8] = entries.flatMap { entry -> [UInt8] in Array(entry.utf8) + [0] }
        var bytes: [UInt8] = Array(prefix.utf8) + [0]
        bytes += withUnsafeBytes(of: magic.bigEndian) { Array($0) }
        for field in [UInt32(40), offset, UInt32(block.count)] { bytes += withUnsafeBytes(of: field) { Array($0) } }
        return bytes + [UInt8](repeating: 0, count: 16) + block
    }

    static func parse(_ datagram: [UInt8]) -> Result<UdevMonitorMessage, UdevMessageRejection> {
        datagram.withUnsafeBytes { UdevMonitorMessage.parse($0) }
    }

    static let required = ["ACTION=add", "DEVPATH=/devices/pci0000:00/usb1/1-2", "SUBSYSTEM=usb", "SEQNUM=4711"]

    @Test func aUSBDevicesAddGivesItsFieldsAndTheKeptProperties() throws {
        let message = try Self.parse(
            Self.datagram(
                Self.required + [
                    "DEVTYPE=usb_device", "DEVNAME=/dev/bus/usb/001/004", "ID_VENDOR_ID=1209", "ID_MODEL_ID=a000",
                    "ID_SERIAL_SHORT=B000000001", "ID_VENDOR_FROM_DATABASE=pid.codes", "ID_SERIAL=pid_B000000001",
                    "MAJOR=189", "MINOR=3",
                ])
        ).get()
        #expect(
            message
                == UdevMonitorMessage(
                    action: "add", devpath: "/devices/pci0000:00/usb1/1-2", subsystem: "usb", devtype: "usb_device",
                    devnode: "/dev/bus/usb/001/004", sequenceNumber: 4711,
                    properties: [.vendorID: "1209", .modelID: "a000", .serialShort: "B000000001"]))
        #expect(message.syspath == "/sys/devices/pci0000:00/usb1/1-2")
        #expect(message.sysname == "1-2")
    }

    @Test func valuesAsLibudevKeepsThem() throws {
        let message = try Self.parse(
            Self.datagram(
                Self.required + [
                    "ID_VENDOR_ID=first", "ID_VENDOR_ID=last", "ID_SERIAL_SHORT=", "DEVNAME=ttyUSB0",
                    "DEVLINKS=/dev/a /dev/b", "DEVLINKS=/dev/b /dev/c", "=no key", "DEVPATH=//devices/./x//ttyUSB0/",
                    "UNKEPT=x=y=z",
                ])
        ).get()
        #expect(message.properties == [.vendorID: "last", .serialShort: "", .devlinks: "/dev/a /dev/b /dev/c"])
        #expect(message.devnode == "/dev/ttyUSB0", "a relative DEVNAME is under /dev")
        #expect(message.devpath == "/devices/x/ttyUSB0", "repeated slashes, '.' and a trailing slash go")
        #expect(try Self.parse(Self.datagram(Self.required + ["DEVNAME="])).get().devnode == "/dev/")
        #expect(try Self.parse(Self.datagram(Self.required + ["DEVPATH=/devices/a!b"])).get().sysname == "a/b")
    }

    @Test func anEntryEndsAtItsFirstLineBreak() throws {
        let message = try Self.parse(
            Self.datagram(
                ["ACTION=add\n", "DEVPATH=/devices/x\r\n", "SUBSYSTEM=usb", "SEQNUM=5\nmore", "ID_VENDOR_ID=12\r09"])
        ).get()
        #expect(message.action == "add" && message.devpath == "/devices/x" && message.sequenceNumber == 5)
        #expect(message.properties == [.vendorID: "12"])
        #expect(throws: UdevMessageRejection("property 5 'KEY' has no '='")) {
            try Self.parse(Self.datagram(Self.required + ["KEY\nX=1"])).get()
        }
    }

    /// Every property classification reads is kept under its udev name, and a key that differs from one of them in a
    /// single byte (or by a byte more or less) is not.
    @Test func eachReadPropertyIsRecognisedByItsWholeName() throws {
        for property in UdevProperty.allCases {
            let name = Array(property.name.utf8)
            let message = try Self.parse(Self.datagram(Self.required + ["\(property.name)=value"])).get()
            #expect(message.properties == [property: "value"], "\(property.name)")
            var nearMisses = [name + Array("X".utf8), Array(name.dropLast()), Array(name.dropFirst())]
            for index in name.indices {
                var changed = name
                changed[index] ^= 0x20
                nearMisses.append(changed)
            }
            for key in nearMisses where !key.isEmpty {
                let text = String(decoding: key, as: UTF8.self)
                let other = try Self.parse(Self.datagram(Self.required + ["\(text)=value"])).get()
                let expected: UdevProperties =
                    UdevProperty.allCases.first { $0.name == text }.map { [$0: "value"] } ?? [:]
                #expect(other.properties == expected, "\(text)")
            }
        }
    }

    /// libudev reads SEQNUM with C's strtoull in base 0.
    @Test(
        arguments: [
            ("5", 5), (" 5", 5), ("\t7", 7), ("+5", 5), ("0x10", 16), ("0X1f", 31), ("010", 8),
            ("18446744073709551615", UInt64.max), ("0", nil), ("", nil), ("5 ", nil), ("-1", nil), ("0x", nil),
            ("08", nil), ("18446744073709551616", nil), ("1e3", nil), ("+ 5", nil), ("+", nil),
        ] as [(String, UInt64?)])
    func sequenceNumbers(text: String, expected: UInt64?) {
        let result = Self.parse(Self.datagram(Array(Self.required.dropLast()) + ["SEQNUM=\(text)"]))
        #expect((try? result.get().sequenceNumber) == expected, "SEQNUM=\(text): \(result)")
    }

    @Test(
        arguments: [
            (["ACTION=add", "DEVPATH=/devices/x", "SUBSYSTEM=usb"], "it lacks DEVPATH, SUBSYSTEM, ACTION or SEQNUM"),
            (["ACTION=add", "DEVPATH=/devices/x", "SEQNUM=1"], "it lacks DEVPATH, SUBSYSTEM, ACTION or SEQNUM"),
            (UdevMonitorMessageTests.required + ["ACTION=ADD"], "ACTION 'ADD' is not a udev action"),
            (UdevMonitorMessageTests.required + ["ACTION="], "ACTION '' is not a udev action"),
            (UdevMonitorMessageTests.required + ["NOEQUALS"], "property 5 'NOEQUALS' has no '='"),
            (UdevMonitorMessageTests.required + [""], "property 5 '' has no '='"),
            (
                UdevMonitorMessageTests.required + ["DEVPATH=devices/x"],
                "DEVPATH 'devices/x' is not an absolute path with a device name and no '..'"
            ),
            (
                UdevMonitorMessageTests.required + ["DEVPATH=/"],
                "DEVPATH '/' is not an absolute path with a device name and no '..'"
            ),
            (
                UdevMonitorMessageTests.required + ["DEVPATH="],
                "DEVPATH '' is not an absolute path with a device name and no '..'"
            ),
            (
                UdevMonitorMessageTests.required + ["DEVPATH=/devices/../x"],
                "DEVPATH '/devices/../x' is not an absolute path with a device name and no '..'"
            ),
        ] as [([String], String)])
    func malformedPropertiesAreDropped(entries: [String], reason: String) {
        #expect(throws: UdevMessageRejection(reason)) { try Self.parse(Self.datagram(entries)).get() }
    }

    @Test func malformedHeadersAreDropped() {
        let good = Self.datagram(Self.required)
        func reason(_ datagram: [UInt8]) -> String? {
            guard case .failure(let rejection) = Self.parse(datagram) else { return nil }
            return rejection.reason
        }
        #expect(reason(Array(good.prefix(31))) == "31 bytes is shorter than a message header")
        #expect(reason(Array(good.prefix(39))) == "39 bytes is shorter than a message header")
        #expect(reason(Self.datagram(Self.required, magic: 0xfeed_cafd))?.hasPrefix("header magic 0xfeedcafd") == true)
        #expect(reason(Self.datagram(Self.required, prefix: "libUdev"))?.hasPrefix("not a udevd message") == true)
        #expect(
            reason(Array("add@/devices/x".utf8) + [UInt8(0)] + good.dropFirst(40))?.hasPrefix("not a udevd message")
                == true)
        #expect(
            reason(Self.datagram(Self.required, offset: 39))
                == "properties offset 39 is outside the \(good.count)-byte message")
        let beyond = UInt32(good.count - 31)
        #expect(
            reason(Self.datagram(Self.required, offset: beyond))
                == "properties offset \(beyond) is outside the \(good.count)-byte message")
        #expect(reason(Array(good.dropLast())) == "property 4 is not ended by a NUL")
        #expect(reason(good) == nil)
    }

    @Test func onlyRootsMulticastsOnUdevsGroupAreTrusted() {
        #expect(UdevMonitorMessage.senderProblem(groups: 2, portID: 812, uid: 0) == nil)
        #expect(UdevMonitorMessage.senderProblem(groups: 1, portID: 0, uid: 0) == nil, "the kernel itself")
        #expect(UdevMonitorMessage.senderProblem(groups: 0, portID: 812, uid: 0)?.contains("unicast") == true)
        #expect(UdevMonitorMessage.senderProblem(groups: 1, portID: 812, uid: 0)?.contains("kernel's group") == true)
        #expect(
            UdevMonitorMessage.senderProblem(groups: 2, portID: 812, uid: nil)?.contains("no sender credentials")
                == true)
        #expect(UdevMonitorMessage.senderProblem(groups: 2, portID: 812, uid: 1000) == "sent by uid 1000, not root")
    }

    /// The entry scan reads eight bytes at a time: every length and every place of a line break or a `=` must give
    /// what a byte-by-byte reading gives.
    @Test func theWordAtATimeScanAgreesWithAPlainOne() throws {
        var random = SplitMix64(seed: SplitMix64.testSeed())
        let alphabet = Array("ab=\n\r_ é".utf8)
        for _ in 0..<3_000 {
            var value: [UInt8] = (0..<Int(random.next(below: 40))).map { _ in
                alphabet[Int(random.next(below: UInt64(alphabet.count)))]
            }
            value.removeAll { $0 == 0 }
            var datagram = Self.datagram(Self.required)
            datagram += Array("ID_SERIAL_SHORT=".utf8) + value + [UInt8(0)]
            let blockLength = UInt32(datagram.count - 40)
            datagram.withUnsafeMutableBytes { $0.storeBytes(of: blockLength, toByteOffset: 20, as: UInt32.self) }
            // Byte by byte: cut at the first line break, then the value is what follows the first '='.
            let entry = Array(("ID_SERIAL_SHORT=".utf8 + value).prefix { $0 != 0x0A && $0 != 0x0D })
            let expected = String(decoding: entry.dropFirst("ID_SERIAL_SHORT=".utf8.count), as: UTF8.self)
            let message = try Self.parse(datagram).get()
            #expect(message.properties[.serialShort] == expected, "value \(value)")
        }
    }
}
