import AccmonTestSupport
import Testing

@testable import AccmonProtocol

/// The fast event line reader must agree with ProtocolCodec (JSONDecoder) on every line it reads, and leave every
/// other line to ProtocolCodec.
@Suite struct EventLineReaderTests {
    /// The line the daemon writes for `event`, without its newline.
    static func line(_ event: AccessoryEvent) -> [UInt8] { Array(EventLineWriter.line(event).dropLast()) }

    static func line(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// The line of a connect of ``Fixtures/fullAccessory`` with sequence number 3, as text.
    static let canonical = String(
        decoding: line(AccessoryEvent(.connect, sequence: 3, accessory: Fixtures.fullAccessory)), as: UTF8.self)

    /// What ProtocolCodec decodes, `nil` when it throws.
    static func decodedByCodec(_ line: [UInt8]) -> ServerMessage? {
        try? ProtocolCodec().decodeServerMessage(line)  // try?: a line JSONDecoder refuses is compared as nil
    }

    @Test(arguments: [Fixtures.fullAccessory, Fixtures.awkwardAccessory, Fixtures.minimalAccessory])
    func readsTheWritersLinesOfFixtures(accessory: Accessory) {
        for event in [
            AccessoryEvent(.connect, sequence: 0, accessory: accessory),
            AccessoryEvent(.disconnect, sequence: UInt64.max, accessory: accessory),
            AccessoryEvent(.connect, sequence: 7, accessory: accessory, rejection: "no \"entry\"\n\\ matches/"),
            AccessoryEvent(.disconnect, sequence: 10, accessory: accessory, rejection: ""),
        ] {
            let line = Self.line(event)
            #expect(EventLineReader.event(line) == event)
            #expect(Self.decodedByCodec(line) == .event(event))
        }
    }

    @Test func readsTheWritersLinesOfRandomEventsAsProtocolCodecDoes() {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        for _ in 0..<3_000 {
            let event = Fixtures.randomEvent(using: &random)
            let line = Self.line(event)
            #expect(EventLineReader.event(line) == event, "seed \(seed) (ACCMON_TEST_SEED): \(event)")
            #expect(Self.decodedByCodec(line) == .event(event), "seed \(seed) (ACCMON_TEST_SEED): \(event)")
        }
    }

    /// A line changed by one byte either is still some event's canonical line, read as ProtocolCodec reads it, or is
    /// left to ProtocolCodec.
    @Test func aLineChangedAnywhereIsReadAsProtocolCodecReadsItOrLeftToIt() {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        let replacements = Array(#"{}[]",:\0123456789abfnrtu eé"#.utf8) + [0x00, 0x1F, 0x7F, 0x80, 0xC3, 0xFF]
        var read = 0
        for _ in 0..<3_000 {
            var line = Self.line(Fixtures.randomEvent(using: &random))
            let position = Int(random.next(below: UInt64(line.count)))
            switch random.next(below: 3) {
            case 0: line[position] = replacements.randomElement(using: &random)!
            case 1: line.remove(at: position)
            default: line.insert(replacements.randomElement(using: &random)!, at: position)
            }
            guard let event = EventLineReader.event(line) else { continue }
            read += 1
            #expect(Self.line(event) == line, "seed \(seed): read a line that is not canonical: \(line)")
            #expect(
                Self.decodedByCodec(line) == .event(event), "seed \(seed): \(String(decoding: line, as: UTF8.self))")
        }
        #expect(read > 0, "seed \(seed): no changed line was still canonical, so the comparison never ran")
    }

    /// Valid lines in another form than the writer's: the reader leaves them to ProtocolCodec, which reads them.
    @Test(arguments: [
        // Escapes the writer does not use: `\/`, `\u` for a printable or non-ASCII character, a surrogate pair,
        // uppercase hex, `\u` for a control character that has a short escape.
        (#"a\/b"#, "a/b"), (#"\u0041"#, "A"), (#"\u00e9"#, "é"), (#"\ud83d\ude00"#, "😀"), (#"\u001F"#, "\u{1F}"),
        (#"\u0008"#, "\u{8}"), (#"\u2028"#, "\u{2028}"),
    ])
    func otherEscapesAreLeftToProtocolCodec(escaped: String, value: String) throws {
        let line = Self.line(Self.canonical.replacing(#""FT232R USB UART""#, with: "\"\(escaped)\""))
        #expect(EventLineReader.event(line) == nil)
        guard case .event(let event) = try ProtocolCodec().decodeServerMessage(line) else {
            Issue.record("not an event")
            return
        }
        #expect(event.accessory.name == value)
    }

    @Test(arguments: [
        // Spacing, key order, optional and unknown fields.
        #"{"accessory": ACCESSORY,"seq":3,"type":"connect"}"#,
        #"{ "accessory":ACCESSORY,"seq":3,"type":"connect"}"#,
        #"{"accessory":ACCESSORY,"seq":3,"type":"connect"} "#,
        #"{"accessory":ACCESSORY,"seq":3,"type":"connect"}"# + "\r",
        #"{"type":"connect","seq":3,"accessory":ACCESSORY}"#,
        #"{"accessory":ACCESSORY,"rejected":null,"seq":3,"type":"connect"}"#,
        #"{"accessory":ACCESSORY,"seq":3,"type":"connect","extra":[1,{"a":null}]}"#,
        #"{"accessory":ACCESSORY,"id":null,"seq":3,"type":"connect"}"#,
    ])
    func otherFormsOfAValidLineAreLeftToProtocolCodec(template: String) throws {
        var accessoryJSON = JSONOutput(capacity: 1024)
        EventLineWriter.accessory(Fixtures.fullAccessory, into: &accessoryJSON)
        let accessoryText = String(decoding: accessoryJSON.bytes(), as: UTF8.self)
        let line = Self.line(template.replacing("ACCESSORY", with: accessoryText))
        #expect(EventLineReader.event(line) == nil)
        let message = try ProtocolCodec().decodeServerMessage(line)
        #expect(message == .event(AccessoryEvent(.connect, sequence: 3, accessory: Fixtures.fullAccessory)))
    }

    /// Every accessory field but `kind` may be omitted (it is then empty): a valid line the reader leaves to the codec.
    @Test func aLineWithoutAnOptionalFieldIsLeftToProtocolCodec() throws {
        let line = Self.line(Self.canonical.replacing(#""name":"FT232R USB UART","#, with: ""))
        #expect(EventLineReader.event(line) == nil)
        var accessory = Fixtures.fullAccessory
        accessory.name = ""
        #expect(
            try ProtocolCodec().decodeServerMessage(line)
                == .event(AccessoryEvent(.connect, sequence: 3, accessory: accessory)))
    }

    @Test func everyTruncationOfALineIsRefused() {
        let event = AccessoryEvent(.disconnect, sequence: 12, accessory: Fixtures.awkwardAccessory, rejection: "x")
        let line = Self.line(event)
        for length in 0..<line.count {
            #expect(EventLineReader.event(Array(line[..<length])) == nil, "\(length) bytes")
        }
    }

    @Test func malformedLinesAreRefusedByBoth() {
        let canonical = Self.canonical
        var malformed: [[UInt8]] = [
            "", "{}", "null", "[]", #"{"accessory":{},"seq":3,"type":"connect"}"#,
            canonical.replacing(#""seq":3"#, with: #""seq":03"#),
            canonical.replacing(#""seq":3"#, with: #""seq":-3"#),
            canonical.replacing(#""seq":3"#, with: #""seq":18446744073709551616"#),
            canonical.replacing(#""seq":3"#, with: #""seq":"3""#),
            canonical.replacing(#""connectionID":42"#, with: #""connectionID":4.2"#),
            canonical.replacing(#""kind":"serial""#, with: #""kind":"toaster""#),
            canonical.replacing(#""type":"connect""#, with: #""type":"plug""#),
            canonical.replacing(#""kind":"serial","#, with: ""),
            canonical.replacing("FT232R", with: #"FT\x32"#),
            canonical.replacing("FT232R", with: #"FT\u00"#),
            canonical.replacing("FT232R", with: "FT\t232R"),
            canonical.replacing("FT232R", with: #"\ud800"#),
            canonical + "x", canonical + "}", String(canonical.dropLast()),
        ].map(Self.line)
        for invalidUTF8: [UInt8] in [[0xFF], [0x80], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xC3]] {
            var line = Self.line(canonical)
            let name = Self.line("FT232R")
            let at = line.firstRange(of: name)!.lowerBound
            line.replaceSubrange(at..<at + name.count, with: invalidUTF8)
            malformed.append(line)
        }
        for line in malformed {
            let text = String(decoding: line, as: UTF8.self)
            #expect(EventLineReader.event(line) == nil, "\(text)")
            #expect(throws: ProtocolError.self, "\(text)") { try ProtocolCodec().decodeServerMessage(line) }
        }
    }
}
