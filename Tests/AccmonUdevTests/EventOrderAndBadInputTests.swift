import AccmonClient
import AccmonDevices
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

extension UdevTests {
    @Suite("odd event orders")
    struct EventOrders {
        @Test("a duplicate add gives one connect")
        func duplicateAdd() async throws {
            let scenario = try await UdevScenario.begin()
            try await scenario.harness.add("usb", "stick")
            let connect = try await scenario.next(1)
            try await scenario.harness.uevent("stick", "add")
            try await scenario.harness.uevent("stick", "add")
            try await scenario.expectQuiet("two more add events for a connected device")
            #expect(try await scenario.list().map(\.connectionID) == connect.map(\.accessory.connectionID))
            try await scenario.finish()
        }

        @Test("a remove without an add gives nothing")
        func removeWithoutAdd() async throws {
            let scenario = try await UdevScenario.begin()
            // In sysfs, but accmond never heard of it: plugged after the coldplug, with no add event.
            try await scenario.harness.add("ftdi", "ghost", events: false)
            try await scenario.harness.remove("ghost")
            try await scenario.expectQuiet("remove events for devices never added")
            #expect(try await scenario.list().isEmpty)
            try await scenario.finish()
        }

        @Test("the tty's add before its USB device's: the serial accessory is still announced right")
        func childBeforeParent() async throws {
            let scenario = try await UdevScenario.begin()
            try await scenario.harness.add("ftdi", "ftdi", bind: false, order: ["tty", "port", "intf", "usb"])
            let (usb, serial) = ColdplugAndHotplug.ftdi(port: "1-1", tty: 0, devnum: 3)
            let connects = try await scenario.next(2)
            expectChanges(connects, [(.connect, serial.sysfsPath), (.connect, usb.sysfsPath)], scenario.report())
            expectAccessory(connects.first?.accessory, serial)
            expectAccessory(connects.last?.accessory, usb)
            try await scenario.expectQuiet("the plug")
            try await scenario.finish()
        }

        @Test("a change event updates the accessory in place: no event, the same connection id")
        func changeUpdatesInPlace() async throws {
            let scenario = try await UdevScenario.begin()
            try await scenario.harness.add("usb", "stick")
            try await scenario.harness.add("btkbd", "keyboard")
            let connects = try await scenario.next(2)
            // The USB product string changes (a firmware update renamed it) and a change event follows.
            try await scenario.harness.set("stick", attributes: ["product": "Cruzer Blade 2"], uevent: "change")
            // The keyboard was renamed (HID_NAME is a udev property of its hid device; the change comes for its node).
            try await scenario.harness.set("keyboard.hid", properties: ["HID_NAME": "Office Keyboard"])
            try await scenario.harness.uevent("keyboard.event", "change")
            try await scenario.expectQuiet("change events")
            let listed = try await scenario.list()
            let stick = listed.first { $0.kind == .usb }
            let keyboard = listed.first { $0.kind == .bluetoothHID }
            #expect(stick?.name == "Cruzer Blade 2")
            #expect(keyboard?.name == "Office Keyboard")
            #expect(
                [stick?.connectionID, keyboard?.connectionID] == connects.map(\.accessory.connectionID),
                "the connections are kept")
            // The next event about them carries the new properties.
            try await scenario.harness.remove("stick")
            #expect(try await scenario.next(1).first?.accessory.name == "Cruzer Blade 2")
            try await scenario.finish()
        }

        @Test("bind and unbind events give no events")
        func bindAndUnbind() async throws {
            let scenario = try await UdevScenario.begin()
            try await scenario.harness.add("ftdi", "ftdi")  // with its bind events
            let connects = try await scenario.next(2)
            for device in ["ftdi.port", "ftdi.intf", "ftdi"] { try await scenario.harness.uevent(device, "unbind") }
            for device in ["ftdi", "ftdi.intf", "ftdi.port"] { try await scenario.harness.uevent(device, "bind") }
            try await scenario.expectQuiet("unbind and bind events")
            #expect(try await scenario.list().map(\.connectionID) == connects.map(\.accessory.connectionID))
            try await scenario.finish()
        }

        @Test("a parent removed without its children's remove events: the children disconnect")
        func parentRemovedAlone() async throws {
            let scenario = try await UdevScenario.begin()
            try await scenario.harness.add("ftdi", "ftdi")  // 1-1
            try await scenario.harness.add("hub", "hub", params: ["children": 2])  // 1-2, children 1-2.1 and 1-2.2
            _ = try await scenario.next(4)
            // Only the usb_device's remove event comes (the others were lost).
            try await scenario.harness.remove("ftdi", order: ["usb"])
            let (usb, serial) = ColdplugAndHotplug.ftdi(port: "1-1", tty: 0, devnum: 3)
            let gone = try await scenario.next(2)
            #expect(Set(gone.map(\.accessory.sysfsPath)) == [usb.sysfsPath, serial.sysfsPath], "\(describe(gone))")
            #expect(gone.allSatisfy { $0.change == .disconnect })
            // Only the hub's remove event comes: both devices behind it disconnect.
            try await scenario.harness.remove("hub", order: ["usb"])
            let behindHub = try await scenario.next(2)
            #expect(Set(behindHub.map(\.accessory.sysfsPath)) == [usbPath("1-2/1-2.1"), usbPath("1-2/1-2.2")])
            #expect(behindHub.allSatisfy { $0.change == .disconnect })
            // Only the keyboard's hid device's remove event comes (not its input and event devices'): it disconnects.
            // (The hci connection above it is in the bluetooth subsystem, which accmond does not watch: a remove of
            // that alone would go unseen; the kernel always removes the children first.)
            let keyboard = try await scenario.harness.add("btkbd", "keyboard")
            expectChanges(try await scenario.next(1), [(.connect, try #require(keyboard["hid"]))])
            try await scenario.harness.remove("keyboard", order: ["hid"])
            expectChanges(try await scenario.next(1), [(.disconnect, try #require(keyboard["hid"]))])
            #expect(try await scenario.list().isEmpty)
            try await scenario.expectQuiet("the removals")
            try await scenario.finish()
        }

        @Test("a hub with 7 devices plugged, then unplugged, in a burst")
        func hubBurst() async throws {
            let scenario = try await UdevScenario.begin()
            try await scenario.harness.add("hub", "hub", params: ["children": 7])
            let connects = try await scenario.next(7)
            let children = Set((1...7).map { usbPath("1-1/1-1.\($0)") })
            #expect(connects.allSatisfy { $0.change == .connect })
            #expect(Set(connects.map(\.accessory.sysfsPath)) == children, "the hub itself is not an accessory")
            try await scenario.expectQuiet("the hub's plug")
            try await scenario.harness.remove("hub")
            let disconnects = try await scenario.next(7)
            #expect(disconnects.allSatisfy { $0.change == .disconnect })
            #expect(Set(disconnects.map(\.accessory.connectionID)) == Set(connects.map(\.accessory.connectionID)))
            #expect(try await scenario.list().isEmpty)
            try await scenario.expectQuiet("the hub's unplug")
            try await scenario.finish()
        }
    }

    @Suite("bad input")
    struct BadInput {
        @Test("garbage devices are skipped or classified without harm, and the skip reason is logged")
        func garbageDevices() async throws {
            let scenario = try await UdevScenario.begin()
            let badVendor = try await scenario.harness.add("badvendor", "clone")  // 1-1, idVendor zz99, with a ttyUSB
            try await scenario.harness.add("noserial", "mouse")  // 1-2
            try await scenario.harness.add("longname", "long")  // 1-3
            try await scenario.harness.add("badutf8", "utf")  // 1-4
            let events = try await scenario.next(3)
            expectChanges(
                events, [(.connect, usbPath("1-2")), (.connect, usbPath("1-3")), (.connect, usbPath("1-4"))],
                scenario.report())
            // No serial number: the accessory id falls back to the port.
            let mouse = events.first?.accessory
            #expect(mouse?.serialNumber == "")
            #expect(mouse?.accessoryID == "usb:046d:c077:port=1-2")
            // A 10 kB product string is cut to the field limit.
            let long = events.dropFirst().first?.accessory
            #expect(long?.name.count == DeviceClassifier.maximumFieldLength)
            #expect(long?.name.hasPrefix("Very Long Product Name Very Long") == true)
            // Invalid UTF-8 is repaired, not fatal.
            let utf = events.last?.accessory
            #expect(utf?.manufacturer.contains("\u{FFFD}") == true, "\(String(describing: utf?.manufacturer))")
            #expect(utf?.manufacturer.contains("Acme") == true)
            #expect(utf?.name == "USB Single Serial")
            try await scenario.expectQuiet("the garbage devices")

            // The daemon still answers, and says why it skipped the device with the non-hex vendor id.
            let status = try await scenario.library.connection.status()
            #expect(status.connectedAccessories == 3)
            let usb = try #require(badVendor["usb"])
            let tty = try #require(badVendor["tty"])
            let log = scenario.harness.accmondLog
            #expect(
                log.contains("udev: add: \(usb): skipped: vendor id 'zz99' is not 4 hex digits"),
                "accmond's log does not give the reason:\n\(scenario.harness.diagnostics())")
            #expect(log.contains("udev: add: \(tty): skipped: parent USB device: vendor id 'zz99' is not 4 hex digits"))
            try await scenario.harness.remove("clone")
            try await scenario.expectQuiet("the clone's removal")
            try await scenario.finish()
        }
    }
}
