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
        #"{"type":"status","type":"status"}"#,  // duplicate key: JSONDecoder takes the first
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
        #"{"type":"status","x":[1,]}"#,  // syntax JSONDecoder lets through in a member it does not read
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

/// Writes a client message by hand in a random one of the forms JSON allows and the reader must read: members in any
/// order, spacing between tokens, characters escaped or not, optional fields absent, `null` or explicit, and unknown
/// members holding any JSON value.
private enum WireForm {
    indirect enum Value {
        case null
        case boolean(Bool)
        /// A number, as written.
        case number(String)
        case string(String)
        /// A string written without escapes, as the reader requires of keys, request types, actions and kinds.
        case plainString(String)
        case array([Value])
        case object([(String, Value)])
    }

    static func line(of message: ClientMessage, using random: inout SplitMix64) -> [UInt8] {
        var out = ""
        space(into: &out, using: &random)
        write(value(of: message, using: &random), into: &out, using: &random)
        space(into: &out, using: &random)
        return Array(out.utf8)
    }

    // MARK: Values

    static func value(of message: ClientMessage, using random: inout SplitMix64) -> Value {
        var members: [(String, Value)] = [("type", .plainString(message.request.typeName))]
        func optional(_ key: String, _ value: Value?, default isDefault: Bool = false) {
            if let value, !isDefault || Bool.random(using: &random) {
                members.append((key, value))
            } else if Bool.random(using: &random) {
                members.append((key, .null))
            }
        }
        switch message.id {
        case .number(let number): members.append(("id", .number(String(number))))
        case .string(let string): members.append(("id", .string(string)))
        case nil: optional("id", nil)
        }
        switch message.request {
        case .hello(let versions, let clientName, let restoreID, let relaunch):
            members.append(("versions", .array(versions.map { .number(String($0)) })))
            optional("client", .string(clientName), default: clientName.isEmpty)
            optional("restoreID", restoreID.map(Value.string))
            optional("relaunch", relaunch.map(Value.string))
        case .subscribe(let filter, let includeRejected), .list(let filter, let includeRejected):
            optional("filter", value(of: filter, using: &random), default: filter == .all)
            optional("all", .boolean(includeRejected), default: !includeRejected)
        case .acknowledge(let sequence):
            members.append(("seq", .number(String(sequence))))
        case .simulateConnect(let accessory):
            members.append(("action", .plainString("connect")))
            members.append(("accessory", value(of: accessory, using: &random)))
        case .simulateDisconnect(let connectionID):
            members.append(("action", .plainString("disconnect")))
            members.append(("connectionID", .number(String(connectionID.rawValue))))
        case .unsubscribe, .suspend, .resume, .status, .reloadManifest:
            break
        }
        return .object(withUnknownMembers(members, using: &random))
    }

    static func value(of filter: AccessoryFilter, using random: inout SplitMix64) -> Value {
        var members: [(String, Value)] = []
        for (key, part) in [
            ("kind", filter.kind.map { Value.plainString($0.rawValue) }),
            ("vendorID", filter.vendorID.map(Value.string)), ("productID", filter.productID.map(Value.string)),
            ("protocol", filter.protocolString.map(Value.string)),
        ] {
            if let part {
                members.append((key, part))
            } else if Bool.random(using: &random) {
                members.append((key, .null))
            }
        }
        return .object(members)  // a filter has no unknown members
    }

    static func value(of accessory: Accessory, using random: inout SplitMix64) -> Value {
        var members: [(String, Value)] = [("kind", .plainString(accessory.kind.rawValue))]
        func optional(_ key: String, _ value: Value, isDefault: Bool) {
            if !isDefault || Bool.random(using: &random) {
                members.append((key, value))
            } else if Bool.random(using: &random) {
                members.append((key, .null))
            }
        }
        // A derived id may be left out, as clients do; any other is sent.
        optional(
            "accessoryID", .string(accessory.accessoryID),
            isDefault: accessory.accessoryID == accessory.derivedAccessoryID)
        optional(
            "connectionID", .number(String(accessory.connectionID.rawValue)),
            isDefault: accessory.connectionID == ConnectionID(0))
        for (key, text) in [
            ("name", accessory.name), ("manufacturer", accessory.manufacturer), ("modelNumber", accessory.modelNumber),
            ("serialNumber", accessory.serialNumber), ("firmwareRevision", accessory.firmwareRevision),
            ("hardwareRevision", accessory.hardwareRevision), ("vendorID", accessory.vendorID),
            ("productID", accessory.productID), ("sysfsPath", accessory.sysfsPath), ("portPath", accessory.portPath),
            ("interfaceNumber", accessory.interfaceNumber), ("descriptorsSHA256", accessory.descriptorsSHA256),
        ] {
            optional(key, .string(text), isDefault: text.isEmpty)
        }
        for (key, texts) in [("protocolStrings", accessory.protocolStrings), ("deviceNodes", accessory.deviceNodes)] {
            optional(key, .array(texts.map(Value.string)), isDefault: texts.isEmpty)
        }
        return .object(withUnknownMembers(members, using: &random))
    }

    /// Names for members no request reads, none of them a known key.
    static let unknownKeys = ["x", "extra", "futureField", "", "Type", "ID", "vendorid", "a b", "_", "\u{7F}"]

    /// `members` with up to two unknown members added.
    static func withUnknownMembers(_ members: [(String, Value)], using random: inout SplitMix64) -> [(String, Value)] {
        let unknown = unknownKeys.shuffled(using: &random).prefix(Int(random.next(below: 3)))
        return members + unknown.map { ($0, anyValue(depth: 0, using: &random)) }
    }

    /// Any JSON value, nested at most three deep.
    static func anyValue(depth: Int, using random: inout SplitMix64) -> Value {
        switch random.next(below: depth < 3 ? 7 : 5) {
        case 0: return .null
        case 1: return .boolean(Bool.random(using: &random))
        case 2:
            let numbers = [
                "0", "-0", "7", "-12", "3.25", "-0.5", "1e10", "2E-3", "-0.0e+5", "123456789012345678901234567890",
            ]
            return .number(numbers.randomElement(using: &random)!)
        case 3, 4: return .string(Fixtures.randomRequestText(using: &random))
        case 5:
            return .array((0..<random.next(below: 4)).map { _ in anyValue(depth: depth + 1, using: &random) })
        default:
            let keys = unknownKeys.shuffled(using: &random).prefix(Int(random.next(below: 4)))
            return .object(keys.map { ($0, anyValue(depth: depth + 1, using: &random)) })
        }
    }

    // MARK: Text

    static func write(_ value: Value, into out: inout String, using random: inout SplitMix64) {
        switch value {
        case .null: out += "null"
        case .boolean(let value): out += value ? "true" : "false"
        case .number(let text): out += text
        case .string(let text): string(text, into: &out, using: &random)
        case .plainString(let text): string(text, into: &out, using: &random, escapingAtRandom: false)
        case .array(let elements):
            out += "["
            for (index, element) in elements.enumerated() {
                if index > 0 { separator(",", into: &out, using: &random) }
                space(into: &out, using: &random)
                write(element, into: &out, using: &random)
                space(into: &out, using: &random)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, (key, value)) in members.shuffled(using: &random).enumerated() {
                if index > 0 { separator(",", into: &out, using: &random) }
                space(into: &out, using: &random)
                string(key, into: &out, using: &random, escapingAtRandom: false)
                separator(":", into: &out, using: &random)
                write(value, into: &out, using: &random)
                space(into: &out, using: &random)
            }
            out += "}"
        }
    }

    static func separator(_ token: String, into out: inout String, using random: inout SplitMix64) {
        space(into: &out, using: &random)
        out += token
        space(into: &out, using: &random)
    }

    /// Nothing, most of the time, or some JSON whitespace.
    static func space(into out: inout String, using random: inout SplitMix64) {
        out += ["", "", "", "", " ", "\t", "\r", "\n", "  ", " \r\n "].randomElement(using: &random)!
    }

    /// A JSON string: characters that must be escaped are, with a short escape or `\u`; others, when
    /// `escapingAtRandom`, sometimes are too (`\/`, `\u` with either case of hex digits, surrogate pairs).
    static func string(
        _ text: String, into out: inout String, using random: inout SplitMix64, escapingAtRandom: Bool = true
    ) {
        out += "\""
        for scalar in text.unicodeScalars {
            let short: String? =
                switch scalar {
                case "\"": #"\""#
                case "\\": #"\\"#
                case "\u{8}": #"\b"#
                case "\u{C}": #"\f"#
                case "\n": #"\n"#
                case "\r": #"\r"#
                case "\t": #"\t"#
                case "/": #"\/"#
                default: nil
                }
            let mustEscape = scalar.value < 0x20 || scalar == "\"" || scalar == "\\"
            if !mustEscape && (!escapingAtRandom || random.next(below: 4) != 0) {
                out.unicodeScalars.append(scalar)
            } else if let short, Bool.random(using: &random) {
                out += short
            } else {
                let uppercase = Bool.random(using: &random)
                for unit in String(scalar).utf16 {
                    let hex = String(unit, radix: 16, uppercase: uppercase)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                }
            }
        }
        out += "\""
    }
}
