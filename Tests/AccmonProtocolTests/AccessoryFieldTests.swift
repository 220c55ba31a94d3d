import AccmonTestSupport
import FoundationEssentials
import Testing

@testable import AccmonProtocol

/// The accessory's fields have one list, ``Accessory/Field``: these fail when the model and the list part, or when a
/// codec drops, renames or mixes up a field.
@Suite("Accessory fields")
struct AccessoryFieldTests {
    @Test func theFieldListIsTheModelsStoredFields() {
        let stored = Mirror(reflecting: Fixtures.fullAccessory).children.compactMap(\.label)
        #expect(Set(stored) == Set(Accessory.Field.allCases.map(\.rawValue)))
        #expect(stored.count == Accessory.Field.allCases.count)
        #expect(Accessory.Field.allCases.map(\.rawValue) == Accessory.Field.allCases.map(\.rawValue).sorted())
    }

    @Test func eachFieldReadsBackWhatWasSetAndRefusesOtherShapes() {
        var accessory = Accessory(kind: .usb)
        for (index, field) in Accessory.Field.allCases.enumerated() {
            let value: Accessory.FieldValue =
                switch field.shape {
                case .text: .text(field == .kind ? "serial" : "value \(index)")
                case .texts: .texts(["a \(index)", "b"])
                case .number: .number(UInt64(index + 1))
                }
            let taken = accessory.set(field, to: value)
            #expect(taken, "\(field)")
            #expect(accessory[field] == value, "\(field)")
            let other: Accessory.FieldValue = field.shape == .number ? .text("1") : .number(1)
            let tookOther = accessory.set(field, to: other)
            #expect(!tookOther, "\(field) took another shape")
            #expect(accessory[field] == value, "\(field) changed by a refused value")
        }
        let tookPrinter = accessory.set(.kind, to: .text("printer"))
        #expect(!tookPrinter)
    }

    @Test func eachFieldIsFoundByItsNameAndNothingElseIs() {
        func named(_ name: String) -> Accessory.Field? {
            Array(name.utf8).withUnsafeBufferPointer { Accessory.Field.named($0) }
        }
        #expect(Accessory.Field.keyed.map(\.field) == Accessory.Field.allCases)
        for (field, quotedKey) in Accessory.Field.keyed {
            #expect(String(decoding: quotedKey, as: UTF8.self) == "\"\(field.rawValue)\":")
            #expect(named(field.rawValue) == field)
        }
        for other in ["", "kin", "kinds", "Kind", "vendorId", "serialNumbe", "accessoryIDx", "\"kind\""] {
            #expect(named(other) == nil, "\(other)")
        }
    }

    /// Every field of an accessory whose fields all differ from each other and from their defaults survives every
    /// pair of writer and reader: a codec that drops a field, or swaps two, fails here.
    @Test func everyCodecCarriesEveryField() throws {
        var accessory = Accessory(kind: .bluetoothHID)
        for (index, field) in Accessory.Field.allCases.enumerated() where field != .kind {
            switch field.shape {
            case .text: accessory.set(field, to: .text("\(field.rawValue)-\(index)"))
            case .texts: accessory.set(field, to: .texts(["\(field.rawValue)-\(index)", "second"]))
            case .number: accessory.set(field, to: .number(UInt64(1000 + index)))
            }
        }
        let event = AccessoryEvent(.connect, sequence: 7, accessory: accessory)
        let codec = ProtocolCodec()
        let written = codec.encode(.event(event))
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]

        // The event line writer against JSONEncoder, and each reader of the line.
        let viaEncoder = Array(try encoder.encode(accessory))
        #expect(String(decoding: written, as: UTF8.self).contains(String(decoding: viaEncoder, as: UTF8.self)))
        #expect(EventLineReader.event(Array(written.dropLast())) == event)
        #expect(try codec.decodeServerMessage(written.dropLast()) == .event(event))
        #expect(try JSONDecoder().decode(Accessory.self, from: Data(viaEncoder)) == accessory)

        // The request reader (a simulate request) against JSONDecoder's reading of the same line.
        var simulated = accessory
        simulated.vendorID = "1209"
        simulated.productID = "0001"
        let request =
            Array(#"{"type":"simulate","action":"connect","accessory":"#.utf8)
            + Array(try encoder.encode(simulated)) + Array("}".utf8)
        let fast = try #require(request.withUnsafeBufferPointer { RequestLineReader.message($0) })
        #expect(fast == (try codec.decodeClientMessageWithJSONDecoder(request).get()))
        guard case .simulateConnect(let read) = fast.request else {
            Issue.record("not a simulate connect: \(fast)")
            return
        }
        for field in Accessory.Field.allCases where field != .connectionID {  // a simulated accessory gets its id
            #expect(read[field] == simulated[field], "\(field)")
        }
    }
}
