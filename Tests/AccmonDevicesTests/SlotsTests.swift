import AccmonDevices
import AccmonProtocol
import AccmonTestSupport
import Testing

/// ``Slots`` against a dictionary doing the same: random sets, clears and empty values, over both kinds of keys.
@Suite struct SlotsTests {
    static func randomOperations<Key: SlotKey>(_: Key.Type, seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let keys = Array(Key.allCases)
        for round in 0..<500 {
            var slots = Slots<Key>()
            var model: [Key: String] = [:]
            for _ in 0..<random.next(below: 40) {
                let key = keys[Int(random.next(below: UInt64(keys.count)))]
                switch random.next(below: 4) {
                case 0:
                    slots[key] = nil
                    model[key] = nil
                case 1:
                    slots[key] = ""  // an empty value is a value
                    model[key] = ""
                default:
                    let value = "v\(random.next(below: 1000))"
                    slots[key] = value
                    model[key] = value
                }
            }
            for key in keys { #expect(slots[key] == model[key], "round \(round): \(key)") }
            // The same values reached without the clears are equal, and hash the same.
            var rebuilt = Slots<Key>()
            for (key, value) in model { rebuilt[key] = value }
            #expect(slots == rebuilt, "round \(round)")
            #expect(slots.hashValue == rebuilt.hashValue, "round \(round)")
            if let (key, value) = model.first {
                rebuilt[key] = value + "x"
                #expect(slots != rebuilt, "round \(round)")
            }
        }
    }

    @Test func udevPropertiesBehaveAsADictionary() { Self.randomOperations(UdevProperty.self, seed: 17) }

    @Test func sysfsAttributesBehaveAsADictionary() { Self.randomOperations(SysfsAttribute.self, seed: 9) }

    @Test func aClearedSlotsEqualsAnEmptyOne() {
        var slots: UdevProperties = [.vendorID: "1209", .serialShort: ""]
        slots[.vendorID] = nil
        slots[.serialShort] = nil
        #expect(slots == UdevProperties())
        #expect(slots.hashValue == UdevProperties().hashValue)
        #expect(slots.description == "[:]")
    }
}
