import AccmonDevices
import AccmonProtocol
import Testing

@testable import AccmondKit

private func device(_ serial: String, kind: AccessoryKind = .usb, name: String = "") -> Accessory {
    Accessory(kind: kind, name: name, serialNumber: serial, vendorID: "1234", productID: "abcd")
}

@Test func connectsAssignIncreasingConnectionIDsAndSequenceNumbers() {
    var registry = Registry()
    #expect(registry.sequence == 0)
    #expect(registry.lastConnectionID == 0)
    let first = registry.attach(key: "/sys/a", device("A"))
    let second = registry.attach(key: "/sys/b", device("B"))
    #expect(first.map(\.change) == [.connect])
    #expect(second.map(\.change) == [.connect])
    #expect(first[0].sequence == 1 && second[0].sequence == 2)
    #expect(first[0].accessory.connectionID == ConnectionID(1))
    #expect(second[0].accessory.connectionID == ConnectionID(2))
    #expect(registry.sequence == 2)
    #expect(registry.lastConnectionID == 2)
    #expect(registry.count == 2)
    #expect(registry.accessory(under: "/sys/b")?.serialNumber == "B")
    #expect(registry.key(of: ConnectionID(1)) == "/sys/a")
    #expect(registry.key(of: ConnectionID(3)) == nil)
}

@Test func numberingContinuesFromTheGivenLastValues() {
    var registry = Registry(lastSequence: 100, lastConnectionID: 7)
    let events = registry.attach(key: "k", device("A"))
    #expect(events.first?.sequence == 101)
    #expect(events.first?.accessory.connectionID == ConnectionID(8))
}

@Test func duplicateAttachUpdatesPropertiesWithoutAnEventAndKeepsTheConnection() {
    var registry = Registry()
    let connect = registry.attach(key: "k", device("A", name: "old name"))
    let duplicate = registry.attach(key: "k", device("A", name: "new name"))
    #expect(duplicate.isEmpty)
    #expect(registry.sequence == 1)
    #expect(registry.accessory(under: "k")?.name == "new name")
    #expect(registry.accessory(under: "k")?.connectionID == connect[0].accessory.connectionID)
    #expect(registry.snapshot().accessories.map(\.name) == ["new name"])
    #expect(registry.lastConnectionID == 1)
}

@Test func differentAccessoryUnderTheSameKeyDisconnectsThenConnects() {
    var registry = Registry()
    _ = registry.attach(key: "k", device("A"))
    let events = registry.attach(key: "k", device("B"))
    #expect(events.map(\.change) == [.disconnect, .connect])
    #expect(events.map(\.sequence) == [2, 3])
    #expect(events[0].accessory.serialNumber == "A" && events[0].accessory.connectionID == ConnectionID(1))
    #expect(events[1].accessory.serialNumber == "B" && events[1].accessory.connectionID == ConnectionID(2))
    #expect(registry.count == 1)
}

@Test func sameIDButDifferentKindIsADifferentAccessory() {
    var registry = Registry()
    _ = registry.attach(key: "k", Accessory(kind: .usb, accessoryID: "same"))
    let events = registry.attach(key: "k", Accessory(kind: .serial, accessoryID: "same"))
    #expect(events.map(\.change) == [.disconnect, .connect])
}

@Test func detachReportsTheConnectionThatEnds() {
    var registry = Registry()
    _ = registry.attach(key: "k", device("A"))
    let events = registry.detach(key: "k")
    #expect(events.map(\.change) == [.disconnect])
    #expect(events[0].sequence == 2)
    #expect(events[0].accessory.connectionID == ConnectionID(1))
    #expect(registry.count == 0)
    #expect(registry.accessory(under: "k") == nil)
    #expect(registry.detach(key: "k").isEmpty, "a second detach is a duplicate")
}

@Test func detachOfAnUnknownKeyYieldsNothing() {
    var registry = Registry()
    #expect(registry.detach(key: "nowhere").isEmpty)
    _ = registry.attach(key: "k", device("A"))
    #expect(registry.detach(key: "other").isEmpty)
    #expect(registry.sequence == 1)
    #expect(registry.count == 1)
}

@Test func snapshotIsInConnectionOrderAndFiltered() {
    var registry = Registry()
    _ = registry.attach(key: "z", device("1"))
    _ = registry.attach(key: "a", device("2", kind: .serial))
    _ = registry.attach(key: "m", device("3"))
    _ = registry.attach(key: "a", device("4", kind: .serial))  // replaces 2: gets a later connection id
    let all = registry.snapshot()
    #expect(all.sequence == registry.sequence)
    #expect(all.sequence == 5)
    #expect(all.accessories.map(\.serialNumber) == ["1", "3", "4"])
    #expect(all.accessories.map(\.connectionID.rawValue) == [1, 3, 4])
    #expect(registry.snapshot(matching: AccessoryFilter(kind: .serial)).accessories.map(\.serialNumber) == ["4"])
    #expect(registry.snapshot(matching: AccessoryFilter(kind: .bluetoothHID)).accessories.isEmpty)
    #expect(registry.snapshot(matching: AccessoryFilter(vendorID: "1234")).accessories.count == 3)
    #expect(Registry().snapshot() == Snapshot(sequence: 0, accessories: []))
}

@Test func connectionIDsAreNeverReused() {
    var registry = Registry()
    var seen: Set<ConnectionID> = []
    for round in 0..<50 {
        for event in registry.attach(key: "k\(round % 3)", device("S\(round % 5)")) where event.change == .connect {
            #expect(seen.insert(event.accessory.connectionID).inserted)
        }
        if round % 4 == 0 { _ = registry.detach(key: "k\(round % 3)") }
    }
    #expect(seen.count >= 20)
    #expect(registry.lastConnectionID == UInt64(seen.count))
}
