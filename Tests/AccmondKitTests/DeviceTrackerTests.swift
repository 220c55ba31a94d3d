import AccmonProtocol
import Testing

@testable import AccmonDevices
@testable import AccmondKit

/// Records shaped like what libudev reports for an FTDI adapter, a hub and a Bluetooth keyboard.
enum Devices {
    static let ftdiPath = "/sys/devices/pci0000:00/0000:00:14.0/usb1/1-2"
    static let ftdiAttributes: SysfsAttributes = [
        .idVendor: "0403", .idProduct: "6001", .serial: "A50285BI", .manufacturer: "FTDI",
        .product: "FT232R USB UART", .bcdDevice: "0600", .bDeviceClass: "00", .removable: "removable",
    ]
    static var ftdiAncestor: AncestorRecord { AncestorRecord(syspath: ftdiPath, attributes: ftdiAttributes) }

    static func ftdi(_ action: String) -> DeviceRecord {
        DeviceRecord(
            action: action, syspath: ftdiPath, subsystem: "usb", devtype: "usb_device",
            devnode: action == "remove" ? "" : "/dev/bus/usb/001/004", attributes: ftdiAttributes)
    }

    static let ttyPath = ftdiPath + "/1-2:1.0/ttyUSB0"
    static func tty(_ action: String) -> DeviceRecord {
        DeviceRecord(
            action: action, syspath: ttyPath, subsystem: "tty", devnode: "/dev/ttyUSB0",
            properties: [
                .devlinks: "/dev/serial/by-id/usb-FTDI_FT232R_USB_UART_A50285BI-if00-port0 /dev/serial/by-path/x"
            ],
            usbDevice: ftdiAncestor,
            usbInterface: AncestorRecord(syspath: ftdiPath + "/1-2:1.0", attributes: [.bInterfaceNumber: "00"]))
    }

    static let hidPath = "/sys/devices/virtual/misc/uhid/0005:05AC:0267.0001"
    static let hid = AncestorRecord(
        syspath: hidPath,
        properties: [.hidID: "0005:000005AC:00000267", .hidName: "Magic Keyboard", .hidUniq: "28:37:37:1a:2b:3c"])

    static func keyboardEvent(_ action: String, _ number: Int) -> DeviceRecord {
        DeviceRecord(
            action: action, syspath: "\(hidPath)/input/input5/event\(number)", subsystem: "input",
            devnode: "/dev/input/event\(number)", hidDevice: hid)
    }
}

@Suite struct DeviceClassifierTests {
    @Test func readsUSBDeviceIdentity() throws {
        guard case .accessory(let key, let accessory) = DeviceClassifier.classify(Devices.ftdi("add")) else {
            Issue.record("the FTDI adapter was not classified as an accessory")
            return
        }
        #expect(key == Devices.ftdiPath)
        #expect(accessory.kind == .usb)
        #expect(accessory.vendorID == "0403" && accessory.productID == "6001")
        #expect(accessory.serialNumber == "A50285BI")
        #expect(accessory.name == "FT232R USB UART" && accessory.manufacturer == "FTDI")
        #expect(accessory.firmwareRevision == "6.00")
        #expect(accessory.portPath == "1-2")
        #expect(accessory.deviceNodes == ["/dev/bus/usb/001/004"])
        #expect(accessory.accessoryID == "usb:0403:6001:serial=A50285BI")
    }

    @Test func serialPortCarriesParentIdentityAndByIDLink() {
        guard case .accessory(_, let accessory) = DeviceClassifier.classify(Devices.tty("add")) else {
            Issue.record("ttyUSB0 was not classified as an accessory")
            return
        }
        #expect(accessory.kind == .serial)
        #expect(accessory.vendorID == "0403" && accessory.serialNumber == "A50285BI")
        #expect(accessory.interfaceNumber == "00")
        #expect(
            accessory.deviceNodes == [
                "/dev/ttyUSB0", "/dev/serial/by-id/usb-FTDI_FT232R_USB_UART_A50285BI-if00-port0",
            ])
        #expect(accessory.accessoryID == "serial:0403:6001:serial=A50285BI:if=00")
    }

    @Test func bluetoothKeyboardIsKeyedByItsHIDDevice() {
        guard
            case .bluetoothHIDNode(let key, let node, let accessory) = DeviceClassifier.classify(
                Devices.keyboardEvent("add", 5))
        else {
            Issue.record("the keyboard's event node was not classified")
            return
        }
        #expect(key == Devices.hidPath)
        #expect(node == "/dev/input/event5")
        #expect(accessory.kind == .bluetoothHID)
        #expect(accessory.vendorID == "05ac" && accessory.productID == "0267")
        #expect(accessory.name == "Magic Keyboard" && accessory.serialNumber == "28:37:37:1a:2b:3c")
    }

    @Test(
        arguments: [
            ("usb1", [.bDeviceClass: "09"], "a root hub"),
            ("1-1", [.bDeviceClass: "09", .idVendor: "05e3", .idProduct: "0608"], "a hub"),
            (
                "1-4", [.idVendor: "8087", .idProduct: "0026", .removable: "fixed"],
                "an internal (non-removable) device"
            ),
        ] as [(String, SysfsAttributes, String)])
    func ignoresHubsAndInternalDevices(sysname: String, attributes: SysfsAttributes, reason: String) {
        let record = DeviceRecord(
            action: "add", syspath: "/sys/devices/usb1/\(sysname)", subsystem: "usb", devtype: "usb_device",
            devnode: "/dev/bus/usb/001/001", attributes: attributes)
        #expect(DeviceClassifier.classify(record) == .ignored(reason: reason))
    }

    @Test func rejectsNonHexIDsWithAReason() {
        var record = Devices.ftdi("add")
        record.attributes[.idVendor] = "zz99"
        #expect(DeviceClassifier.classify(record) == .rejected(reason: "vendor id 'zz99' is not 4 hex digits"))
    }

    @Test func cleansGarbageStrings() {
        var record = Devices.ftdi("add")
        record.attributes[.product] = String(repeating: "x", count: 10_000)
        record.attributes[.manufacturer] = "  Bad\u{1}\u{7F}Corp\n  "
        guard case .accessory(_, let accessory) = DeviceClassifier.classify(record) else {
            Issue.record("a device with long strings was not classified")
            return
        }
        #expect(accessory.name.count == DeviceClassifier.maximumFieldLength)
        #expect(accessory.manufacturer == "BadCorp")
    }

    @Test func waitsForTheDeviceNode() {
        var record = Devices.tty("add")
        record.devnode = ""
        #expect(DeviceClassifier.classify(record) == .ignored(reason: "no device node yet"))
    }
}

@Suite struct DeviceTrackerTests {
    @Test func duplicateAddIsOneConnection() {
        var tracker = DeviceTracker()
        var registry = Registry()
        var events: [AccessoryEvent] = []
        for record in [Devices.ftdi("add"), Devices.ftdi("add"), Devices.ftdi("bind"), Devices.ftdi("change")] {
            for report in tracker.apply(record).events { events += registry.apply(report) }
        }
        #expect(events.map(\.change) == [.connect])
    }

    @Test func changeUpdatesPropertiesInPlace() {
        var tracker = DeviceTracker()
        var registry = Registry()
        for report in tracker.apply(Devices.ftdi("add")).events { _ = registry.apply(report) }
        var renamed = Devices.ftdi("change")
        renamed.attributes[.product] = "Renamed"
        for report in tracker.apply(renamed).events { #expect(registry.apply(report).isEmpty) }
        #expect(registry.snapshot().accessories.map(\.name) == ["Renamed"])
        #expect(registry.snapshot().accessories.map(\.connectionID) == [ConnectionID(1)])
    }

    @Test func removeWithoutAddAndUnbindProduceNothing() {
        var tracker = DeviceTracker()
        #expect(tracker.apply(Devices.ftdi("remove")).events.isEmpty)
        #expect(tracker.apply(Devices.ftdi("unbind")).events.isEmpty)
    }

    @Test func parentRemovalDisconnectsChildrenWithoutTheirRemoves() {
        var tracker = DeviceTracker()
        _ = tracker.apply(Devices.tty("add"))  // the child first: classified from sysfs
        _ = tracker.apply(Devices.ftdi("add"))
        #expect(tracker.attachedKeys == [Devices.ftdiPath, Devices.ttyPath])
        let events = tracker.apply(Devices.ftdi("remove")).events
        #expect(Set(events) == [.detached(key: Devices.ftdiPath), .detached(key: Devices.ttyPath)])
        #expect(tracker.attachedKeys.isEmpty)
    }

    /// A remove takes the device and what is under it (`1-2/...`), in key order, never a sibling whose name only
    /// begins the same way (`1-20`).
    @Test func removalTakesThePathAndWhatIsUnderItOnly() {
        var tracker = DeviceTracker()
        let sibling = DeviceRecord(
            action: "add", syspath: Devices.ftdiPath + "0", subsystem: "usb", devtype: "usb_device",
            devnode: "/dev/bus/usb/001/005", attributes: Devices.ftdiAttributes)
        for record in [sibling, Devices.tty("add"), Devices.ftdi("add")] { _ = tracker.apply(record) }
        #expect(
            tracker.apply(Devices.ftdi("remove")).events == [
                .detached(key: Devices.ftdiPath), .detached(key: Devices.ttyPath),
            ])
        #expect(tracker.attachedKeys == [sibling.syspath])
        #expect(DeviceTracker.isAt("/a/b", orUnder: "/a/b"))
        #expect(DeviceTracker.isAt("/a/b/c", orUnder: "/a/b"))
        #expect(!DeviceTracker.isAt("/a/bc", orUnder: "/a/b"))
        #expect(!DeviceTracker.isAt("/a", orUnder: "/a/b"))
        #expect(!DeviceTracker.isAt("/a/c", orUnder: "/a/b"))
    }

    @Test func keyboardWithTwoEventNodesIsOneAccessory() {
        var tracker = DeviceTracker()
        var registry = Registry()
        var events: [AccessoryEvent] = []
        for record in [Devices.keyboardEvent("add", 5), Devices.keyboardEvent("add", 6)] {
            for report in tracker.apply(record).events { events += registry.apply(report) }
        }
        #expect(events.map(\.change) == [.connect])
        #expect(registry.snapshot().accessories.first?.deviceNodes == ["/dev/input/event5", "/dev/input/event6"])
        for report in tracker.apply(Devices.keyboardEvent("remove", 5)).events { events += registry.apply(report) }
        #expect(events.map(\.change) == [.connect])
        #expect(registry.snapshot().accessories.first?.deviceNodes == ["/dev/input/event6"])
        for report in tracker.apply(Devices.keyboardEvent("remove", 6)).events { events += registry.apply(report) }
        #expect(events.map(\.change) == [.connect, .disconnect])
    }

    @Test func reconcileReportsNetChangesAfterLostEvents() {
        var tracker = DeviceTracker()
        _ = tracker.apply(Devices.ftdi("add"))
        _ = tracker.apply(Devices.tty("add"))
        // While events were lost, the tty went away and a keyboard came.
        let events = tracker.reconcile(with: [Devices.ftdi(""), Devices.keyboardEvent("", 5)])
        #expect(events.first == .detached(key: Devices.ttyPath))
        #expect(events.dropFirst().map(\.key) == [Devices.ftdiPath, Devices.hidPath])
        #expect(tracker.attachedKeys == [Devices.ftdiPath, Devices.hidPath])
    }
}

extension Registry {
    /// Applies one source report, as the broker does.
    mutating func apply(_ report: SourceEvent) -> [AccessoryEvent] {
        switch report {
        case .attached(let key, let accessory): attach(key: key, accessory)
        case .detached(let key): detach(key: key)
        case .inventory(let prefix, let keys): reconcile(keyPrefix: prefix, present: keys)
        }
    }
}

extension SourceEvent {
    var key: String {
        switch self {
        case .attached(let key, _), .detached(let key): key
        case .inventory(let prefix, _): prefix
        }
    }
}

/// What a source must copy out of libudev for each kind of event: no more than the tracker reads.
@Suite struct RecordNeedsTests {
    @Test(arguments: ["remove", "unbind"])
    func aDeviceGoingAwayNeedsNothingButItsPath(action: String) {
        for (subsystem, devtype, sysname) in [
            ("usb", "usb_device", "1-2"), ("tty", "", "ttyUSB0"), ("input", "", "event5"),
        ] {
            let needs = DeviceClassifier.needs(action: action, subsystem: subsystem, devtype: devtype, sysname: sysname)
            #expect(needs == DeviceClassifier.RecordNeeds(properties: false), "\(action) \(sysname)")
        }
    }

    @Test func anArrivingDeviceNeedsWhatItsClassificationReads() {
        typealias Needs = DeviceClassifier.RecordNeeds
        #expect(
            DeviceClassifier.needs(action: "add", subsystem: "usb", devtype: "usb_device", sysname: "1-2")
                == Needs(attributes: true))
        #expect(
            DeviceClassifier.needs(action: "change", subsystem: "tty", devtype: "", sysname: "ttyACM0")
                == Needs(usbDevice: true, usbInterface: true))
        #expect(
            DeviceClassifier.needs(action: "add", subsystem: "input", devtype: "", sysname: "event5")
                == Needs(hidDevice: true))
        #expect(DeviceClassifier.needs(action: "add", subsystem: "tty", devtype: "", sysname: "ttyS0") == Needs())
    }

    /// A remove applied from a record without properties (what the source now builds) reports what a full one does.
    @Test func aRemoveWithoutPropertiesDetachesAsAFullOneDoes() {
        var tracker = DeviceTracker()
        let attached = tracker.apply(Devices.ftdi("add"))
        #expect(attached.events.count == 1)
        var bare = Devices.ftdi("remove")
        bare.properties = [:]
        bare.attributes = [:]
        #expect(tracker.apply(bare).events == [.detached(key: Devices.ftdiPath)])
    }
}
