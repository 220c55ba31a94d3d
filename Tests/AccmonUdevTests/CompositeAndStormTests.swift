import AccmonClient
import AccmonDevices
import AccmonProtocol
import AccmonTestSupport
import Foundation
import Testing

extension UdevTests {
    @Suite("composite devices and plug storms")
    struct CompositeAndStorm {
        @Test("a USB device with a serial interface: the serial accessory lives exactly as long as its tty")
        func compositeDevice() async throws {
            let scenario = try await UdevScenario.begin()
            let (usb, serial) = ColdplugAndHotplug.ftdi(port: "1-1", tty: 0, devnum: 3)
            // The device, its interface and the usb-serial port arrive; the tty does not yet.
            try await scenario.harness.add("ftdi", "ftdi", order: ["usb", "intf", "port"])
            expectChanges(try await scenario.next(1), [(.connect, usb.sysfsPath)], scenario.report())
            try await scenario.expectQuiet("the device without its tty")

            // The tty (the serial accessory's device node) arrives: now the serial accessory connects.
            try await scenario.harness.uevent("ftdi.tty", "add")
            let serialConnect = try await scenario.next(1)
            expectChanges(serialConnect, [(.connect, serial.sysfsPath)])
            expectAccessory(serialConnect.first?.accessory, serial)

            // The tty goes (the driver unbound, say): the serial accessory disconnects, the usb one stays.
            try await scenario.harness.uevent("ftdi.tty", "remove")
            let serialDisconnect = try await scenario.next(1)
            expectChanges(serialDisconnect, [(.disconnect, serial.sysfsPath)])
            #expect(serialDisconnect.first?.accessory.connectionID == serialConnect.first?.accessory.connectionID)
            #expect(try await scenario.list().map(\.sysfsPath) == [usb.sysfsPath])

            // It comes back: the same accessory id, a new connection.
            try await scenario.harness.uevent("ftdi.tty", "add")
            let again = try await scenario.next(1)
            expectChanges(again, [(.connect, serial.sysfsPath)])
            #expect(again.first?.accessory.accessoryID == serial.accessoryID)
            #expect(again.first?.accessory.connectionID != serialConnect.first?.accessory.connectionID)
            #expect(Set(try await scenario.list().map(\.kind)) == [.usb, .serial])

            try await scenario.harness.remove("ftdi")
            expectChanges(try await scenario.next(2), [(.disconnect, serial.sysfsPath), (.disconnect, usb.sysfsPath)])
            try await scenario.expectQuiet("the unplug")
            try await scenario.finish()
        }

        /// Accessories per plug of each storm instance.
        static let accessoriesPerPlug = ["ftdi": 2, "stick": 1, "keyboard": 1, "uno": 2, "mouse": 1]

        /// A client that falls 4 MB behind is suspended and gets coalesced events (by design): with thousands of
        /// events on a busy 2-core machine, let the clients' buffers hold the whole storm, so that what is tested is
        /// the udev path.
        static let stormArguments = ["--log-level", "debug", "--max-client-buffer", String(64 << 20)]

        @Test("a plug storm of 1,000 cycles over five devices: nothing lost, sequence without gaps, final state right")
        func plugStorm() async throws {
            try await Self.runPlugStorm(cycles: 1000, accmondArguments: Self.stormArguments)
        }

        /// A burst faster than accmond builds a backlog in the monitor's socket. accmond publishes it in slices of
        /// `UdevEventSource.eventsPerTurn` events, each written before the next is taken, so clients that keep
        /// reading get every event even with a buffer far smaller than the backlog: none is suspended and none
        /// sees coalesced events (taking the whole backlog in one turn suspended them).
        @Test("a plug storm with small client buffers: clients that keep reading still get every event")
        func plugStormWithSmallClientBuffers() async throws {
            try await Self.runPlugStorm(
                cycles: 400, accmondArguments: ["--log-level", "debug", "--max-client-buffer", String(128 << 10)])
        }

        static func runPlugStorm(cycles: Int, accmondArguments: [String]) async throws {
            let scenario = try await UdevScenario.begin(accmondArguments: accmondArguments)
            try await scenario.harness.add("ftdi", "ftdi")
            try await scenario.harness.add("usb", "stick")
            try await scenario.harness.add("btkbd", "keyboard")
            try await scenario.harness.add("acm", "uno")
            try await scenario.harness.add("noserial", "mouse")
            let initial = try await scenario.next(7)
            #expect(initial.allSatisfy { $0.change == .connect })

            let storm = try await scenario.harness.send(
                [
                    "op": "storm", "names": ["ftdi", "stick", "keyboard", "uno", "mouse"], "cycles": cycles,
                    "mode": "events", "seed": 7, "final": ["stick", "ftdi"],
                ], timeout: .seconds(90))
            let perName = try #require(storm["per_name"] as? [String: [String: Int]], "\(storm)")
            var expectedConnects = 0
            var expectedDisconnects = 0
            for (name, counts) in perName {
                let accessories = try #require(Self.accessoriesPerPlug[name])
                expectedConnects += (counts["plugs"] ?? 0) * accessories
                expectedDisconnects += (counts["unplugs"] ?? 0) * accessories
            }
            #expect((storm.int("unplugs") ?? 0) >= cycles, "\(storm)")
            let events = try await scenario.next(expectedConnects + expectedDisconnects, timeout: .seconds(60))

            // Counts, and every connect matched by exactly one later disconnect (but the final ones).
            let all = initial + events
            #expect(all.count(where: { $0.change == .connect }) == expectedConnects + 7)
            #expect(all.count(where: { $0.change == .disconnect }) == expectedDisconnects)
            var open: [ConnectionID: AccessoryEvent] = [:]
            var problems: [String] = []
            for event in all {
                let id = event.accessory.connectionID
                switch event.change {
                case .connect:
                    if open[id] != nil { problems.append("connection \(id) connected twice") }
                    if open.values.contains(where: { $0.accessory.sysfsPath == event.accessory.sysfsPath }) {
                        problems.append("seq \(event.sequence): \(event.accessory.sysfsPath) connected while connected")
                    }
                    open[id] = event
                case .disconnect:
                    if open.removeValue(forKey: id) == nil {
                        problems.append("seq \(event.sequence): \(id) not connected")
                    }
                }
            }
            #expect(problems.isEmpty, "\(problems.prefix(10).joined(separator: "\n"))")
            // Sequence numbers: strictly increasing by one, from the snapshot's on.
            let snapshot = try scenario.snapshot()
            let sequences = all.map(\.sequence)
            #expect(
                sequences == Array((snapshot.sequence + 1)...(snapshot.sequence + UInt64(all.count))),
                "gaps or disorder in the sequence numbers")

            // The final state: what is plugged (the stick, and the FTDI adapter's two accessories).
            let listed = try await scenario.list()
            let expectedPaths: Set<String> = [
                usbPath("1-1"), usbPath("1-1") + "/1-1:1.0/ttyUSB0/tty/ttyUSB0", usbPath("1-2"),
            ]
            #expect(Set(listed.map(\.sysfsPath)) == expectedPaths, "\(listed.map(describe))")
            #expect(Set(listed.map(\.connectionID)) == Set(open.keys), "the list is what the events left connected")
            let status = try await scenario.library.connection.status()
            #expect(status.sequence == sequences.last)
            #expect(status.connectedAccessories == 3)
            let suspensions = try await scenario.harness.send(["op": "log", "contains": "client does not read"])
            #expect((suspensions["lines"] as? [String])?.isEmpty == true, "\(suspensions)")
            try await scenario.expectQuiet("the storm")
            try await scenario.finish()
        }

        @Test("a plug storm on real sysfs: devices deleted and re-created each cycle (100 cycles)")
        func plugStormRecreatingDevices() async throws {
            let scenario = try await UdevScenario.begin(accmondArguments: Self.stormArguments)
            try await scenario.harness.add("ftdi", "ftdi")
            try await scenario.harness.add("btkbd", "keyboard")
            _ = try await scenario.next(3)
            let storm = try await scenario.harness.send(
                [
                    "op": "storm", "names": ["ftdi", "keyboard"], "cycles": 100, "mode": "testbed", "seed": 3,
                    "final": [String](),
                ], timeout: .seconds(90))
            let perName = try #require(storm["per_name"] as? [String: [String: Int]], "\(storm)")
            let plugs = (perName["ftdi"]?["plugs"] ?? 0) * 2 + (perName["keyboard"]?["plugs"] ?? 0)
            let unplugs = (perName["ftdi"]?["unplugs"] ?? 0) * 2 + (perName["keyboard"]?["unplugs"] ?? 0)
            let events = try await scenario.next(plugs + unplugs, timeout: .seconds(60))
            #expect(events.count(where: { $0.change == .connect }) == plugs)
            #expect(events.count(where: { $0.change == .disconnect }) == unplugs)
            #expect(try await scenario.list().isEmpty)
            try await scenario.expectQuiet("the storm")
            try await scenario.finish()
        }
    }
}
