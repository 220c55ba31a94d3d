import AccmonTestSupport
import Testing

@testable import AccmonProtocol

/// The JSONDecoder path's own checks (``RequestLineCheck``): a key twice in an object at any depth, and an integer
/// field written with a fraction or an exponent, are refused with `invalid-field`, where JSONDecoder alone kept the
/// first key and read `1e-999999` as 0; and the fast reader never reads such a line itself.
@Suite struct RequestLineCheckTests {
    static func failure(_ line: [UInt8]) -> ClientDecodingFailure? {
        guard case .failure(let failure) = ProtocolCodec().decodeClientMessage(line) else { return nil }
        return failure
    }

    /// Every object in `value` with its path as error messages write it ("" for the request object).
    static func objects(
        in value: WireForm.Value, at path: [RequestLineCheck.Component] = []
    )
        -> [(path: [RequestLineCheck.Component], members: [(String, WireForm.Value)])]
    {
        switch value {
        case .object(let members):
            return [(path, members)] + members.flatMap { objects(in: $0.1, at: path + [.key($0.0)]) }
        case .array(let elements):
            return elements.enumerated().flatMap { objects(in: $0.element, at: path + [.index($0.offset)]) }
        default:
            return []
        }
    }

    /// `value` with the object at `path` given `members`.
    static func replacing(
        _ value: WireForm.Value, at path: ArraySlice<RequestLineCheck.Component>,
        with members: [(String, WireForm.Value)]
    ) -> WireForm.Value {
        guard let first = path.first else { return .object(members) }
        switch (value, first) {
        case (.object(let current), .key(let key)):
            return .object(
                current.map { $0.0 == key ? ($0.0, replacing($0.1, at: path.dropFirst(), with: members)) : $0 })
        case (.array(let elements), .index(let index)):
            var elements = elements
            elements[index] = replacing(elements[index], at: path.dropFirst(), with: members)
            return .array(elements)
        default:
            return value
        }
    }

    @Test func aKeySentTwiceAnywhereIsRefusedNamingIt() {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        var refused = 0
        for _ in 0..<3_000 {
            let value = WireForm.value(of: Fixtures.randomClientMessage(using: &random), using: &random)
            let candidates = Self.objects(in: value).filter { !$0.members.isEmpty }
            guard let (path, members) = candidates.randomElement(using: &random) else { continue }
            let repeated = members.randomElement(using: &random)!
            // The second copy holds another value: JSONDecoder alone would take whichever came first.
            let changed = Self.replacing(
                value, at: path[...], with: members + [(repeated.0, WireForm.anyValue(depth: 2, using: &random))])
            var text = ""
            WireForm.write(changed, into: &text, using: &random)
            let line = Array(text.utf8)
            let keyPath = RequestLineCheck.path(path + [.key(repeated.0)])
            let expected = "message: \(keyPath.isEmpty ? "line" : keyPath): duplicate key '\(repeated.0)'"
            #expect(RequestLineReaderTests.read(line) == nil, "seed \(seed) (ACCMON_TEST_SEED): \(text)")
            let failure = Self.failure(line)
            #expect(failure?.error.code == .invalidField, "seed \(seed): \(text): \(String(describing: failure))")
            #expect(failure?.error.message == expected, "seed \(seed): \(text)")
            refused += 1
        }
        #expect(refused > 2_500)
    }

    /// The integer fields of random requests in every form, each written once otherwise (same value, with a
    /// fraction or an exponent): refused at that field, where JSONDecoder alone read the same request.
    @Test func anIntegerFieldWrittenOtherwiseIsRefusedAtItsPath() {
        let seed = SplitMix64.testSeed()
        var random = SplitMix64(seed: seed)
        var refused = 0
        for _ in 0..<3_000 {
            let message = Fixtures.randomClientMessage(using: &random)
            guard case .object(let members) = WireForm.value(of: message, using: &random) else { continue }
            // The integer fields the request reads: the id, seq, connectionID, versions' elements, the accessory's
            // connectionID.
            var fields: [(path: String, rewrite: (String) -> [(String, WireForm.Value)])] = []
            for (index, (key, value)) in members.enumerated() {
                func replaced(_ new: WireForm.Value) -> [(String, WireForm.Value)] {
                    var copy = members
                    copy[index] = (key, new)
                    return copy
                }
                switch (key, value) {
                case ("id", .number(let text)), ("seq", .number(let text)), ("connectionID", .number(let text)):
                    fields.append((key, { replaced(.number($0.isEmpty ? text : $0)) }))
                case ("versions", .array(let elements)):
                    for (position, element) in elements.enumerated() {
                        guard case .number = element else { continue }
                        fields.append(
                            (
                                "versions.[\(position)]",
                                { number in
                                    var changed = elements
                                    changed[position] = .number(number)
                                    return replaced(.array(changed))
                                }
                            ))
                    }
                case ("accessory", .object(let fieldsOfAccessory)):
                    guard let at = fieldsOfAccessory.firstIndex(where: { $0.0 == "connectionID" }),
                        case .number = fieldsOfAccessory[at].1
                    else { continue }
                    fields.append(
                        (
                            "accessory.connectionID",
                            { number in
                                var changed = fieldsOfAccessory
                                changed[at] = ("connectionID", .number(number))
                                return replaced(.object(changed))
                            }
                        ))
                default: continue
                }
            }
            guard let field = fields.randomElement(using: &random) else { continue }
            guard case .number(let original)? = Self.number(at: field.path, in: members) else { continue }
            // Requests the JSONDecoder path refuses anyway (an id that is not hex) say something else first.
            var plain = ""
            WireForm.write(.object(members), into: &plain, using: &random)
            guard RequestLineReaderTests.decodedByJSONDecoder(Array(plain.utf8)) != nil else { continue }
            let forms = ["\(original).0", "\(original)e0", "\(original)E+0", "\(original).000e-0", "\(original)e00"]
            var text = ""
            WireForm.write(.object(field.rewrite(forms.randomElement(using: &random)!)), into: &text, using: &random)
            let line = Array(text.utf8)
            #expect(RequestLineReaderTests.read(line) == nil, "seed \(seed) (ACCMON_TEST_SEED): \(text)")
            let failure = Self.failure(line)
            let expected =
                field.path == "id"
                ? "message: id: expected a string or an integer, written without a fraction or an exponent"
                : "\(message.request.typeName): \(field.path): \(RequestLineCheck.integerExpected)"
            // A version of 2^63 or more does not fit an Int as a Double either: JSONDecoder refuses it by itself.
            if failure?.error.message != expected && field.path.hasPrefix("versions") {
                #expect(failure?.error.code == .invalidField, "seed \(seed): \(text)")
            } else {
                #expect(failure?.error.message == expected, "seed \(seed): \(text): \(String(describing: failure))")
            }
            #expect(failure?.id == (field.path == "id" ? nil : message.id), "seed \(seed): \(text)")
            refused += 1
        }
        #expect(refused > 1_000)
    }

    /// The number written at `path` (a top-level key, `versions.[n]` or `accessory.connectionID`) in `members`.
    static func number(at path: String, in members: [(String, WireForm.Value)]) -> WireForm.Value? {
        let parts = path.split(separator: ".").map(String.init)
        guard let top = members.first(where: { $0.0 == parts[0] })?.1 else { return nil }
        guard parts.count == 2 else { return top }
        switch top {
        case .array(let elements): return Int(parts[1].dropFirst().dropLast()).map { elements[$0] }
        case .object(let inner): return inner.first(where: { $0.0 == parts[1] })?.1
        default: return nil
        }
    }

    @Test func keysAreComparedUnescaped() throws {
        let line = Array(#"{"type":"list","id":"x","filter":{"kind":"usb","k\u0069nd":"serial"}}"#.utf8)
        let failure = Self.failure(line)
        #expect(failure?.error == ProtocolError(.invalidField, "message: filter.kind: duplicate key 'kind'"))
        #expect(failure?.id == .string("x"))
        // The same key in two different objects is no duplicate.
        let twoObjects = Array(#"{"type":"status","a":{"k":1},"b":{"k":1},"c":[{"k":1},{"k":2}]}"#.utf8)
        #expect(try ProtocolCodec().decodeClientMessage(twoObjects).get().request == .status)
    }

    /// The id is echoed unless it is the key sent twice.
    @Test func aDuplicateKeyFailureCarriesTheIDWhenItIsSound() {
        #expect(Self.failure(Array(#"{"type":"status","type":"reload","id":5}"#.utf8))?.id == .number(5))
        #expect(Self.failure(Array(#"{"type":"status","id":5,"id":6}"#.utf8))?.id == nil)
        #expect(Self.failure(Array(#"{"type":"status","type":"x","id":1.5}"#.utf8))?.id == nil)
    }

    /// Where the protocol takes an integer, one written with a fraction or an exponent is refused, whatever its
    /// value: JSONDecoder alone read `1e-999999` as 0 and `1e2` as 100, yet refused 2⁶³−1 written with an exponent.
    @Test(arguments: ["1e-999999", "1.0", "1e2", "1E2", "1e+2", "9.223372036854775807e18", "0.0", "-0.0", "5e0"])
    func integersWrittenOtherwiseAreRefused(_ number: String) {
        let cases: [(line: String, message: String, id: RequestID?)] = [
            (
                #"{"type":"status","id":\#(number)}"#,
                "message: id: expected a string or an integer, written without a fraction or an exponent", nil
            ),
            (#"{"type":"ack","id":1,"seq":\#(number)}"#, "ack: seq: \(RequestLineCheck.integerExpected)", .number(1)),
            (
                #"{"type":"hello","id":"h","versions":[1,\#(number)]}"#,
                "hello: versions.[1]: \(RequestLineCheck.integerExpected)", .string("h")
            ),
            (
                #"{"type":"simulate","id":2,"action":"disconnect","connectionID":\#(number)}"#,
                "simulate: connectionID: \(RequestLineCheck.integerExpected)", .number(2)
            ),
            (
                #"{"type":"simulate","id":3,"action":"connect","accessory":{"kind":"usb","connectionID":\#(number)}}"#,
                "simulate: accessory.connectionID: \(RequestLineCheck.integerExpected)", .number(3)
            ),
        ]
        for (line, message, id) in cases {
            let bytes = Array(line.utf8)
            #expect(RequestLineReaderTests.read(bytes) == nil, "\(line)")
            let failure = Self.failure(bytes)
            // 9.22e18 does not fit a version or an id: JSONDecoder refuses it on its own, with its own wording.
            #expect(failure?.error.code == .invalidField, "\(line): \(String(describing: failure))")
            if failure?.error.message != message {
                #expect(
                    number.contains("e18") && failure?.error.message.contains("expected") == true,
                    "\(line): \(String(describing: failure?.error.message))")
            }
            #expect(failure?.id == id, "\(line)")
        }
    }

    /// The same fields written as integers still decode, `-0` among them; a member no request reads may hold any
    /// number.
    @Test func integersWrittenAsIntegersAndNumbersInUnreadMembersDecode() throws {
        let codec = ProtocolCodec()
        func request(_ line: String) throws -> ClientMessage { try codec.decodeClientMessage(Array(line.utf8)).get() }
        #expect(try request(#"{"type":"status","id":-0}"#) == ClientMessage(id: .number(0), .status))
        #expect(try request(#"{"type":"ack","seq":-0}"#).request == .acknowledge(0))
        #expect(try request(#"{"type":"status","seq":1e2,"versions":[1.5],"x":{"id":1e-999999}}"#).request == .status)
        #expect(try request(#"{"type":"ack","seq":7,"connectionID":2.5}"#).request == .acknowledge(7))
        // A key that looks like a path (a dot, a bracket) is another member: found by the fuzzer, which saw the
        // one-pass reader take this hello and the JSONDecoder path refuse it.
        let found = Array(#"{"type":"hello","versions":[2,1],"versions.[ons":[2,1e0],"client":null}"#.utf8)
        let hello = try codec.decodeClientMessageWithJSONDecoder(found).get()
        #expect(hello.request == .hello(versions: [2, 1], clientName: "", restoreID: nil, relaunch: nil))
        #expect(RequestLineReaderTests.read(found) == hello)
        let claim = #"{"type":"claim","connections":[1],"connections.[":[1e0],"count.":1.5}"#
        #expect(try request(claim).request.typeName == "claim")
        let plug = #"{"type":"simulate","action":"connect","accessory.connectionID":1e0,"accessory":{"kind":"usb"}}"#
        #expect(try request(plug).request.typeName == "simulate")
    }

    /// A line with a syntax error JSONDecoder alone let through in a member it does not read is not JSON.
    @Test(arguments: [
        #"{"type":"status","x":[1,]}"#, #"{"type":"status","x":01}"#, #"{"type":"status","x":1.}"#,
        #"{"type":"status","x":"\q"}"#, #"{"type":"status","x":"\ud800"}"#, #"{"type":"status",}"#,
        #"{"type":"status","x":{"a":1,}}"#, #"{"type":"status","x":-}"#, #"{"type":"status","x":1e}"#,
        #"{"type":"status","x":nul}"#, #"{"type":"status","x":[1 2]}"#, #"{"type":"status" "x":1}"#,
    ])
    func lenientSyntaxIsNotJSON(_ text: String) {
        let failure = Self.failure(Array(text.utf8))
        #expect(failure?.error == ProtocolError(.malformedJSON, "message: line: not valid JSON"), "\(text)")
    }

    /// A byte-order mark before the object is skipped, as JSONDecoder does; the fast reader leaves it to this path.
    @Test func aByteOrderMarkIsSkipped() throws {
        let line = Array("\u{FEFF}{\"type\":\"status\",\"id\":4}".utf8)
        #expect(try ProtocolCodec().decodeClientMessage(line).get() == ClientMessage(id: .number(4), .status))
    }

    /// Nesting tens of thousands deep is scanned without recursion: refused by JSONDecoder's depth limit after the
    /// check, not a crash in it.
    @Test func deepNestingIsScannedWithoutRecursion() {
        let depth = 30_000
        let line = Array(
            (#"{"type":"status","x":"# + String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
                + "}").utf8)
        #expect(line.withUnsafeBufferPointer { RequestLineCheck.scan($0) } != nil)
        #expect(Self.failure(line)?.error.code == .malformedJSON)
    }
}
