import AccmonTestSupport
import Testing

@testable import AccmonProtocol

/// The fast request reader must give exactly the message the JSONDecoder path gives for every line it reads, read the
/// forms clients send, and leave every other line to the JSONDecoder path, so that errors stay as they were.
@Suite struct RequestLineReaderTests {
    static func read(_ line: [UInt8]) -> ClientMessage? {
        line.withUnsafeBufferPointer { RequestLineReader.message($0) }
    }

    /// What the JSONDecoder path decodes, `nil` when it fails.
    static func decodedByJSONDecoder(_ line: [UInt8]) -> ClientMessage? {
        try? ProtocolCodec().decodeClientMessageWithJSONDecoder(line).get()  // try?: a failure is compared as nil
    }

    static func text(_ line: [UInt8]) -> String { String(decoding: line, as: UTF8.self) }

    @Test func readsEveryLineTheCodecWritesAsJSONDecoderDoes() {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        let codec = ProtocolCodec()
        var decoded = 0
        for _ in 0..<4_000 {
            let line = Array(codec.encode(Fixtures.randomClientMessage(using: &random)).dropLast())
            let expected = Self.decodedByJSONDecoder(line)
            // The JSONDecoder path refuses some (an id that is not hex): the reader must leave those to it.
            #expect(Self.read(line) == expected, "seed \(seed) (ACCMON_TEST_SEED): \(Self.text(line))")
            if expected != nil { decoded += 1 }
        }
        #expect(decoded > 3_000, "too few valid requests to mean anything: \(decoded)")
    }

    @Test func readsRequestsInAnyFormAsJSONDecoderDoes() {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        var decoded = 0
        var typesDecoded: Set<String> = []
        for _ in 0..<4_000 {
            let message = Fixtures.randomClientMessage(using: &random)
            let line = WireForm.line(of: message, using: &random)
            let expected = Self.decodedByJSONDecoder(line)
            // Every form written here is one the reader must read, so it agrees with JSONDecoder even on nil.
            #expect(Self.read(line) == expected, "seed \(seed) (ACCMON_TEST_SEED): \(Self.text(line))")
            if let expected {
                decoded += 1
                typesDecoded.insert(expected.request.typeName)
            }
        }
        #expect(decoded > 3_000, "too few valid requests to mean anything: \(decoded)")
        #expect(typesDecoded.count == 10)
    }

    /// A valid line changed by one byte, or cut short, decodes exactly as the JSONDecoder path decodes it, errors
    /// included.
    @Test func aLineChangedAnywhereDecodesAsWithJSONDecoderAlone() {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        let codec = ProtocolCodec()
        let replacements =
            Array(#"{}[]":,\/0123456789-+.eEabfnrtuxDd "#.utf8) + [
                0x00, 0x09, 0x0A, 0x1F, 0x7F, 0x80, 0xC3, 0xED, 0xFF,
            ]
        var readByReader = 0
        for round in 0..<8_000 {
            let message = Fixtures.randomClientMessage(using: &random)
            var line =
                round.isMultiple(of: 2)
                ? Array(codec.encode(message).dropLast()) : WireForm.line(of: message, using: &random)
            let position = Int(random.next(below: UInt64(line.count)))
            switch random.next(below: 4) {
            case 0: line[position] = replacements.randomElement(using: &random)!
            case 1: line.remove(at: position)
            case 2: line.insert(replacements.randomElement(using: &random)!, at: position)
            default: line.removeSubrange(position...)
            }
            #expect(
                codec.decodeClientMessage(line) == codec.decodeClientMessageWithJSONDecoder(line),
                "seed \(seed) (ACCMON_TEST_SEED): \(Self.text(line))")
            if Self.read(line) != nil { readByReader += 1 }
        }
        // Many changes land inside a string or a skipped member and keep the line valid: those the reader reads.
        #expect(readByReader > 500)
    }

    /// Forms that are valid, or that JSONDecoder lets through, but that the reader is not sure of: it leaves them to
    /// the JSONDecoder path, which decodes them as before.
    @Test(arguments: [
        #"{"type":"status","type":"status"}"#,  // duplicate keys: refused by the JSONDecoder path's check
        #"{"type":"status","id":1,"id":2}"#,
        #"{"type":"simulate","action":"connect","accessory":{"kind":"usb","name":"a","name":"b"}}"#,
        #"{"type":"status","x":{"a":1,"a":2}}"#,
        #"{"type":"status","id":-0}"#,  // numbers other than plain integers
        #"{"type":"status","id":1.0}"#,
        #"{"type":"ack","seq":1e2}"#,
        #"{"type":"ack","seq":-0}"#,
        #"{"type":"ack","seq":18446744073709551616}"#,
        #"{"type":"status","id":9223372036854775808}"#,
        #"{"type":"hello","versions":[1,9223372036854775808]}"#,
        "\u{FEFF}{\"type\":\"status\"}",  // byte-order mark
        #"{"type":"status","x":[1,]}"#,  // syntax JSONDecoder alone would let through in a member it does not read
        #"{"type":"status","x":01}"#,
        #"{"type":"status","x":1.}"#,
        #"{"type":"status","x":"\q"}"#,
        #"{"type":"status","x":"\ud800"}"#,
        #"{"typ\u0065":"status"}"#,  // keys with an escape or non-ASCII
        #"{"type":"status","\u00e9":1}"#,
        #"{"type":"status","é":1}"#,
        #"{"type":"st\u0061tus"}"#,  // a type, action or kind with an escape
        #"{"type":"simulate","action":"c\u006fnnect","accessory":{"kind":"usb"}}"#,
        #"{"type":"simulate","action":"connect","accessory":{"kind":"\u0075sb"}}"#,
        #"{"type":"subscribe","filter":{"kind":"s\u0065rial"}}"#,
        // more than 32 keys open at once
        #"{"type":"status","x":{"# + (0..<40).map { #""k\#($0)":0"# }.joined(separator: ",") + "}}",
        #"{"type":"status","seq":"x"}"#,  // a known member of the wrong type in a request that does not read it
        #"{"type":"status","filter":{"vendor":"1"}}"#,
        #"{"type":"ack","seq":null}"#,  // null where the request requires a value
        #"{"type":"simulate","action":"connect","accessory":null}"#,
        #"{"type":"simulate","action":"disconnect","connectionID":null}"#,
        #"{"type":"hello","versions":null}"#,
        #"{"type":null}"#,
        #"{"type":"status","x":"# + String(repeating: "[", count: 40) + String(repeating: "]", count: 40) + "}",
        #"{"type":"subscribe","filter":{"vendorID":"12345"}}"#,  // invalid values
        #"{"type":"simulate","action":"connect","accessory":{"kind":"usb","vendorID":"0x12"}}"#,
        #"{"type":"simulate","action":"explode"}"#,
        #"{"type":"frobnicate"}"#,
        #"{"type":"status"} x"#,  // not JSON
        #"{"type":"status""#,
        #"{"type":"status",}"#,
        "[{\"type\":\"status\"}]",
        "",
    ])
    func leavesUnusualFormsToJSONDecoder(_ text: String) {
        let line = Array(text.utf8)
        let codec = ProtocolCodec()
        #expect(Self.read(line) == nil)
        #expect(codec.decodeClientMessage(line) == codec.decodeClientMessageWithJSONDecoder(line))
    }

    /// Of the forms left to the JSONDecoder path, those that are valid still decode: a type, action or kind written
    /// with an escape, or a line with more than 32 keys open at once.
    @Test func formsLeftToJSONDecoderStillDecode() throws {
        let codec = ProtocolCodec()
        func decoded(_ text: String) throws -> ClientRequest {
            #expect(Self.read(Array(text.utf8)) == nil)
            return try codec.decodeClientMessage(Array(text.utf8)).get().request
        }
        #expect(try decoded(#"{"type":"st\u0061tus"}"#) == .status)
        #expect(
            try decoded(#"{"type":"simulate","action":"c\u006fnnect","accessory":{"kind":"\u0075sb"}}"#)
                == .simulateConnect(Accessory(kind: .usb)))
        #expect(
            try decoded(#"{"type":"subscribe","filter":{"kind":"s\u0065rial"}}"#)
                == .subscribe(AccessoryFilter(kind: .serial), includeRejected: false))
        let manyKeys = (0..<40).map { #""k\#($0)":0"# }.joined(separator: ",")
        #expect(try decoded(#"{"type":"status","x":{"# + manyKeys + "}}") == .status)
    }

    @Test func readsTheRequestsOfTheFanOutBenchmark() throws {
        let line = Array(
            (#"{"type":"simulate","id":12,"action":"connect","accessory":{"kind":"usb","vendorID":"1209","#
                + #""productID":"0001","serialNumber":"F000000002","name":"fanout device"}}"#).utf8)
        let expected = ClientMessage(
            id: .number(12),
            .simulateConnect(
                Accessory(
                    kind: .usb, name: "fanout device", serialNumber: "F000000002", vendorID: "1209",
                    productID: "0001")))
        #expect(Self.read(line) == expected)
        #expect(try ProtocolCodec().decodeClientMessageWithJSONDecoder(line).get() == expected)
    }

    /// `simulate` `connect` stores vendor and product ids as four lowercase digits, and derives a derived accessory
    /// id again from them; an id sent otherwise is kept (PROTOCOL.md §7.7). Both paths share this step.
    @Test func bothPathsNormaliseSimulatedAccessoryIDs() throws {
        let cases: [(sent: String, accessoryID: String, vendorID: String, productID: String)] = [
            (
                #"{"kind":"usb","vendorID":"1D6B","productID":"104","portPath":"3-1"}"#, "usb:1d6b:0104:port=3-1",
                "1d6b", "0104"
            ),
            (
                #"{"kind":"usb","vendorID":"1D6B","productID":"104","portPath":"3-1","accessoryID":"usb:1D6B:104:port=3-1"}"#,
                "usb:1d6b:0104:port=3-1", "1d6b", "0104"
            ),
            (#"{"kind":"usb","vendorID":"1D6B","productID":"104","accessoryID":"mine"}"#, "mine", "1d6b", "0104"),
            (#"{"kind":"usb","vendorID":"1d6b","productID":"0104","accessoryID":"mine"}"#, "mine", "1d6b", "0104"),
            (#"{"kind":"usb","vendorID":"1d6b","productID":"0104"}"#, "usb:1d6b:0104", "1d6b", "0104"),
            (#"{"kind":"serial","productID":"a"}"#, "serial:-:000a", "", "000a"),
        ]
        for (sent, accessoryID, vendorID, productID) in cases {
            let line = Array((#"{"type":"simulate","action":"connect","accessory":"# + sent + "}").utf8)
            for message in [Self.read(line), Self.decodedByJSONDecoder(line)] {
                guard case .simulateConnect(let accessory) = message?.request else {
                    Issue.record("not read as a simulate connect: \(sent)")
                    continue
                }
                #expect(accessory.accessoryID == accessoryID, "\(sent)")
                #expect(accessory.vendorID == vendorID, "\(sent)")
                #expect(accessory.productID == productID, "\(sent)")
            }
        }
    }

    @Test func readsEscapesAndSurrogatePairs() {
        let line = Array(#"{"type":"hello","versions":[1],"client":"\"\\\/\b\f\n\r\t\u00e9\u00C9\ud83d\ude00é😀"}"#.utf8)
        #expect(
            Self.read(line)
                == ClientMessage(.hello(versions: [1], clientName: "\"\\/\u{8}\u{C}\n\r\t\u{E9}\u{C9}😀é😀")))
        #expect(Self.read(line) == Self.decodedByJSONDecoder(line))
    }
}
