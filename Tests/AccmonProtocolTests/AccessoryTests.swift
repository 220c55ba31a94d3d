import AccmonTestSupport
import Testing

@testable import AccmonProtocol

/// `Accessory` keeps its fields in a shared copy-on-write box: it must still behave as a plain value.
@Suite struct AccessoryTests {
    static var textFields: [WritableKeyPath<Accessory, String>] {
        [
            \.accessoryID, \.name, \.manufacturer, \.modelNumber, \.serialNumber, \.firmwareRevision,
            \.hardwareRevision, \.vendorID, \.productID, \.sysfsPath, \.portPath, \.interfaceNumber,
            \.descriptorsSHA256,
        ]
    }
    static var listFields: [WritableKeyPath<Accessory, [String]>] { [\.protocolStrings, \.deviceNodes] }

    @Test func writingACopyLeavesTheOriginalAsItWas() {
        var random = SplitMix64(seed: 7)
        for _ in 0..<200 {
            let original = Fixtures.randomEvent(using: &random).accessory
            let saved = Mirror(reflecting: original).children.map { "\($0.value)" }
            var copies: [Accessory] = []
            for field in Self.textFields {
                var copy = original
                copy[keyPath: field] += "+"
                copies.append(copy)
            }
            for field in Self.listFields {
                var copy = original
                copy[keyPath: field].append("+")
                copies.append(copy)
            }
            var kindCopy = original
            kindCopy.kind = original.kind == .usb ? .serial : .usb
            var connectionCopy = original
            connectionCopy.connectionID = ConnectionID(original.connectionID.rawValue &+ 1)
            copies += [kindCopy, connectionCopy]

            #expect(Mirror(reflecting: original).children.map { "\($0.value)" } == saved)
            for copy in copies {
                #expect(copy != original)
                // Exactly one field differs from the original.
                let differing = zip(Mirror(reflecting: copy).children, Mirror(reflecting: original).children)
                    .filter { "\($0.value)" != "\($1.value)" }
                #expect(differing.count == 1)
            }
        }
    }

    @Test func accessoriesWithEqualFieldsAreEqualAndHashAlike() {
        var random = SplitMix64(seed: 11)
        for _ in 0..<200 {
            let accessory = Fixtures.randomEvent(using: &random).accessory
            let rebuilt = Accessory(
                kind: accessory.kind, accessoryID: accessory.accessoryID, connectionID: accessory.connectionID,
                name: accessory.name, manufacturer: accessory.manufacturer, modelNumber: accessory.modelNumber,
                serialNumber: accessory.serialNumber, firmwareRevision: accessory.firmwareRevision,
                hardwareRevision: accessory.hardwareRevision, vendorID: accessory.vendorID,
                productID: accessory.productID, protocolStrings: accessory.protocolStrings,
                deviceNodes: accessory.deviceNodes, sysfsPath: accessory.sysfsPath, portPath: accessory.portPath,
                interfaceNumber: accessory.interfaceNumber, descriptorsSHA256: accessory.descriptorsSHA256)
            #expect(rebuilt == accessory)
            #expect(rebuilt.hashValue == accessory.hashValue)
            #expect(Set([rebuilt, accessory]).count == 1)
        }
    }

    @Test func derivedIDFollowsSerialThenPortThenSysfsPath() {
        let base = Accessory(kind: .serial, vendorID: "0403", productID: "6001", interfaceNumber: "01")
        #expect(base.accessoryID == "serial:0403:6001:if=01")
        var withPath = base
        withPath.sysfsPath = "/sys/devices/x"
        #expect(withPath.derivedAccessoryID == "serial:0403:6001:sysfs=/sys/devices/x:if=01")
        withPath.portPath = "1-2"
        #expect(withPath.derivedAccessoryID == "serial:0403:6001:port=1-2:if=01")
        withPath.serialNumber = "A5 é"
        #expect(withPath.derivedAccessoryID == "serial:0403:6001:serial=A5 é:if=01")
        #expect(Accessory(kind: .bluetoothHID).accessoryID == "bluetooth-hid:-:-")
    }

    /// The id is built from bytes; it must be the text the fields spell, whatever they hold.
    @Test func derivedIDIsTheFieldsJoined() {
        var random = SplitMix64(seed: 3)
        for _ in 0..<500 {
            let accessory = Fixtures.randomEvent(using: &random).accessory
            var expected = "\(accessory.kind.rawValue):\(accessory.usbID)"
            if !accessory.serialNumber.isEmpty {
                expected += ":serial=\(accessory.serialNumber)"
            } else if !accessory.portPath.isEmpty {
                expected += ":port=\(accessory.portPath)"
            } else if !accessory.sysfsPath.isEmpty {
                expected += ":sysfs=\(accessory.sysfsPath)"
            }
            if !accessory.interfaceNumber.isEmpty { expected += ":if=\(accessory.interfaceNumber)" }
            #expect(accessory.derivedAccessoryID == expected)
        }
    }
}
