import AccmonClient
import AccmonDevices
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

/// accmond on the real libudev path, with umockdev's fake sysfs and uevents (Tests/umockdev/testbed.py). Each test
/// has its own testbed, network namespace and accmond. The tests run one at a time: each storms a 2-core machine.
@Suite("udev through umockdev", .serialized, .timeLimit(.minutes(2)))
struct UdevTests {}

extension UdevTests {
    @Suite("coldplug and hotplug")
    struct ColdplugAndHotplug {
        /// The FTDI adapter's two accessories, on port `port`, with its serial port `ttyUSB<tty>`.
        static func ftdi(port: String, tty: Int, devnum: Int, serial: String = "A50285BI") -> (Accessory, Accessory) {
            let usb = Accessory(
                kind: .usb, name: "FT232R USB UART", manufacturer: "FTDI", modelNumber: "6001", serialNumber: serial,
                firmwareRevision: "6.00", vendorID: "0403", productID: "6001",
                deviceNodes: [String(format: "/dev/bus/usb/001/%03d", devnum)], sysfsPath: usbPath(port),
                portPath: port)
            let serialPort = Accessory(
                kind: .serial, name: "FT232R USB UART", manufacturer: "FTDI", modelNumber: "6001",
                serialNumber: serial, firmwareRevision: "6.00", vendorID: "0403", productID: "6001",
                // The node, then the by-id links (not the by-path ones).
                deviceNodes: ["/dev/ttyUSB\(tty)", "/dev/serial/by-id/usb-FTDI_FT232R_USB_UART_\(serial)-if00-port0"],
                sysfsPath: usbPath(port) + "/\(port):1.0/ttyUSB\(tty)/tty/ttyUSB\(tty)", portPath: port,
                interfaceNumber: "00")
            return (usb, serialPort)
        }

        @Test("devices present before accmond starts are in the snapshot; hubs, root hubs, internal devices are not")
        func coldplugSnapshot() async throws {
            let scenario = try await UdevScenario.begin(coldplug: [
                Device(template: "ftdi", name: "ftdi"),  // 1-1: usb + serial
                Device(template: "hub", name: "hub", params: ["children": 2]),  // 1-2 (ignored), 1-2.1 and 1-2.2
                Device(template: "internal", name: "camera"),  // 1-3, removable=fixed: ignored
                Device(template: "roothub", name: "roothub"),  // usb3: ignored
                Device(template: "acm", name: "arduino"),  // 1-4: usb + serial
                Device(template: "btkbd", name: "keyboard"),  // bluetooth-hid
                Device(template: "noserial", name: "mouse"),  // 1-5
            ])
            let snapshot = try scenario.snapshot()
            let paths = Set(snapshot.accessories.map(\.sysfsPath))
            let bluetoothHID =
                "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-10/1-10:1.0/bluetooth/hci0/hci0:257/"
                + "0005:05AC:0267.0001"
            let expected: Set<String> = [
                usbPath("1-1"), usbPath("1-1") + "/1-1:1.0/ttyUSB0/tty/ttyUSB0",
                usbPath("1-2/1-2.1"), usbPath("1-2/1-2.2"),
                usbPath("1-4"), usbPath("1-4") + "/1-4:1.0/tty/ttyACM0",
                bluetoothHID, usbPath("1-5"),
            ]
            #expect(paths == expected, "snapshot:\n\(snapshot.accessories.map(describe).joined(separator: "\n"))")
            // Not there: the hub 1-2, the camera 1-3, the internal Bluetooth controller 1-10, the root hubs.
            for ignored in [
                usbPath("1-2"), usbPath("1-3"), usbPath("1-10"), "/sys/devices/pci0000:00/0000:00:14.0/usb3",
            ] {
                #expect(!paths.contains(ignored), "\(ignored) is in the snapshot")
            }
            #expect(snapshot.sequence == UInt64(expected.count), "one connect per coldplugged accessory")
            #expect(Set(snapshot.accessories.map(\.connectionID)).count == expected.count, "connection ids are unique")
            let (usb, serial) = Self.ftdi(port: "1-1", tty: 0, devnum: 3)
            expectAccessory(snapshot.accessories.first { $0.sysfsPath == usb.sysfsPath }, usb)
            expectAccessory(snapshot.accessories.first { $0.sysfsPath == serial.sysfsPath }, serial)
            let keyboard = snapshot.accessories.first { $0.kind == .bluetoothHID }
            #expect(keyboard?.deviceNodes == ["/dev/input/event5"])
            #expect(keyboard?.name == "Magic Keyboard")
            // The list agrees, and nothing else happens.
            #expect(try await scenario.list() == snapshot.accessories)
            try await scenario.expectQuiet("coldplug")
            try await scenario.finish()
        }

        @Test("a USB device: connect with every field, then disconnect")
        func hotplugUSB() async throws {
            let scenario = try await UdevScenario.begin()
            let devices = try await scenario.harness.add(
                "usb", "stick", params: ["serial": "4C530001231115117143", "bcdDevice": "0127"])
            let connect = try await scenario.next(1)
            #expect(connect.first?.change == .connect)
            let expected = Accessory(
                kind: .usb, name: "Cruzer Blade", manufacturer: "SanDisk", modelNumber: "5567",
                serialNumber: "4C530001231115117143", firmwareRevision: "1.27", vendorID: "0781", productID: "5567",
                deviceNodes: ["/dev/bus/usb/001/003"], sysfsPath: usbPath("1-1"), portPath: "1-1")
            #expect(devices["usb"] == expected.sysfsPath)
            expectAccessory(connect.first?.accessory, expected, scenario.report())
            #expect(connect.first?.accessory.accessoryID == "usb:0781:5567:serial=4C530001231115117143")
            // The descriptor hash is what sha256sum says of the testbed's binary `descriptors` file.
            let root = try #require(try await scenario.harness.send(["op": "status"]).string("root"))
            let sum = try await run(
                URL(fileURLWithPath: "/usr/bin/sha256sum"), [root + expected.sysfsPath + "/descriptors"],
                in: try TemporaryDirectory()
            ).stdout
            #expect(connect.first?.accessory.descriptorsSHA256 == String(sum.prefix(64)), "\(sum)")
            #expect(connect.first?.accessory.descriptorsSHA256.count == 64)
            try await scenario.expectQuiet("the plug (add and bind events)")  // bind events bring nothing new

            try await scenario.harness.remove("stick")
            let disconnect = try await scenario.next(1)
            #expect(disconnect.first?.change == .disconnect)
            #expect(disconnect.first?.accessory.connectionID == connect.first?.accessory.connectionID)
            #expect(try await scenario.list().isEmpty)
            try await scenario.expectQuiet("the unplug")
            try await scenario.finish()
        }

        @Test("an FTDI adapter (ttyUSB): a usb and a serial accessory, the serial one with its by-id link")
        func hotplugFTDI() async throws {
            let scenario = try await UdevScenario.begin()
            try await scenario.harness.add("ftdi", "ftdi")
            let connects = try await scenario.next(2)
            let (usb, serial) = Self.ftdi(port: "1-1", tty: 0, devnum: 3)
            expectChanges(connects, [(.connect, usb.sysfsPath), (.connect, serial.sysfsPath)], scenario.report())
            expectAccessory(connects.first?.accessory, usb)
            expectAccessory(connects.last?.accessory, serial)
            #expect(connects.last?.accessory.accessoryID == "serial:0403:6001:serial=A50285BI:if=00")
            try await scenario.expectQuiet("the plug")

            try await scenario.harness.remove("ftdi")
            let disconnects = try await scenario.next(2)
            // The kernel removes the tty first, then the interface, then the device.
            expectChanges(disconnects, [(.disconnect, serial.sysfsPath), (.disconnect, usb.sysfsPath)])
            #expect(disconnects.map(\.accessory.connectionID) == connects.reversed().map(\.accessory.connectionID))
            try await scenario.finish()
        }

        @Test("a CDC-ACM board (ttyACM): a usb and a serial accessory on interface 00")
        func hotplugACM() async throws {
            let scenario = try await UdevScenario.begin()
            try await scenario.harness.add("acm", "uno")
            let connects = try await scenario.next(2)
            let base = Accessory(
                kind: .usb, name: "Arduino Uno", manufacturer: "Arduino (www.arduino.cc)", modelNumber: "0043",
                serialNumber: "75833353035351A0C1E1", firmwareRevision: "0.01", vendorID: "2341", productID: "0043",
                deviceNodes: ["/dev/bus/usb/001/003"], sysfsPath: usbPath("1-1"), portPath: "1-1")
            var serial = base
            serial.kind = .serial
            serial.sysfsPath = usbPath("1-1") + "/1-1:1.0/tty/ttyACM0"
            serial.interfaceNumber = "00"
            serial.deviceNodes = [
                "/dev/ttyACM0", "/dev/serial/by-id/usb-Arduino_(www.arduino.cc)_Arduino_Uno_75833353035351A0C1E1-if00",
            ]
            serial.accessoryID = serial.derivedAccessoryID
            expectChanges(connects, [(.connect, base.sysfsPath), (.connect, serial.sysfsPath)], scenario.report())
            expectAccessory(connects.first?.accessory, base)
            expectAccessory(connects.last?.accessory, serial)
            try await scenario.harness.remove("uno")
            expectChanges(try await scenario.next(2), [(.disconnect, serial.sysfsPath), (.disconnect, base.sysfsPath)])
            try await scenario.finish()
        }

        @Test("a Bluetooth keyboard with two event nodes: one accessory, named from HID_NAME, ids from HID_ID")
        func hotplugBluetoothKeyboard() async throws {
            let scenario = try await UdevScenario.begin()
            let devices = try await scenario.harness.add(
                "btkbd", "keyboard",
                params: ["nodes": 2, "name": "Magic Keyboard", "address": "28:37:37:1a:2b:3c"])
            let connect = try await scenario.next(1)
            let hid = try #require(devices["hid"])
            let expected = Accessory(
                kind: .bluetoothHID, name: "Magic Keyboard", serialNumber: "28:37:37:1a:2b:3c", vendorID: "05ac",
                productID: "0267", deviceNodes: ["/dev/input/event5"], sysfsPath: hid)
            expectAccessory(connect.first?.accessory, expected, scenario.report())
            #expect(connect.first?.change == .connect)
            // The second event node joins the same accessory: no event, and the list shows both nodes.
            try await scenario.expectQuiet("the second event node")
            let listed = try await scenario.list()
            #expect(listed.count == 1)
            #expect(listed.first?.deviceNodes == ["/dev/input/event5", "/dev/input/event6"])
            #expect(listed.first?.connectionID == connect.first?.accessory.connectionID)

            try await scenario.harness.remove("keyboard")
            let disconnect = try await scenario.next(1)
            #expect(disconnect.first?.change == .disconnect)
            #expect(disconnect.first?.accessory.connectionID == connect.first?.accessory.connectionID)
            try await scenario.expectQuiet("the unpair")
            try await scenario.finish()
        }
    }
}
