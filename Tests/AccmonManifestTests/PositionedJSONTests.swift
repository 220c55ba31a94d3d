import AccmonJSON
import AccmonManifest
import AccmonProtocol
import Testing

@Suite("Position-tracking JSON parser")
struct PositionedJSONTests {
    func parse(_ text: String) throws -> PositionedJSON {
        try PositionedJSON.parse(Array(text.utf8)).get()
    }

    func syntaxError(_ bytes: [UInt8]) -> JSONSyntaxError? {
        if case .failure(let error) = PositionedJSON.parse(bytes) { return error }
        return nil
    }

    @Test func everyKeyAndValueHasItsLineAndColumn() throws {
        let text = """
            {
              "version": 1,
              "list": [true, null, "x"],
              "nested": {"a": -2.5e3}
            }
            """
        let root = try parse(text)
        #expect(root.position == SourcePosition(line: 1, column: 1))
        guard case .object(let members) = root.value else {
            Issue.record("not an object")
            return
        }
        #expect(members.map(\.key) == ["version", "list", "nested"])
        #expect(
            members.map(\.keyPosition) == [
                .init(line: 2, column: 3), .init(line: 3, column: 3), .init(line: 4, column: 3),
            ])
        #expect(members[0].value == PositionedJSON(.number("1"), at: .init(line: 2, column: 14)))
        guard case .array(let elements) = members[1].value.value else {
            Issue.record("not an array")
            return
        }
        #expect(members[1].value.position == SourcePosition(line: 3, column: 11))
        #expect(elements.map(\.position.column) == [12, 18, 24])
        #expect(elements.map(\.value) == [.bool(true), .null, .string("x")])
        guard case .object(let nested) = members[2].value.value else {
            Issue.record("not an object")
            return
        }
        #expect(nested[0].keyPosition == SourcePosition(line: 4, column: 14))
        #expect(nested[0].value == PositionedJSON(.number("-2.5e3"), at: .init(line: 4, column: 19)))
    }

    @Test func commentsAndTrailingCommasAreAccepted() throws {
        let text = """
            // a line comment
            /* a block
               comment */ {
              "a": [1, 2,], // trailing comma in an array
              "b": {"c": 3,}, /* and in an object */
            }
            """
        let root = try parse(text)
        #expect(root.position == SourcePosition(line: 3, column: 15))
        guard case .object(let members) = root.value else {
            Issue.record("not an object")
            return
        }
        #expect(members.map(\.key) == ["a", "b"])
    }

    @Test func columnsCountCharactersNotBytes() throws {
        // "é" is two bytes, "😀" four: the column after each still advances by one.
        let root = try parse("{\"é😀\": \"ü\", \"k\": 1}")
        guard case .object(let members) = root.value else {
            Issue.record("not an object")
            return
        }
        #expect(members[0].value.position == SourcePosition(line: 1, column: 8))
        #expect(members[1].keyPosition == SourcePosition(line: 1, column: 13))
        #expect(members[1].value.position == SourcePosition(line: 1, column: 18))
    }

    @Test func escapesAreDecodedAndMarkTheStringAsNotVerbatim() throws {
        let root = try parse(#"["a\"b\\c\/\n\t\u00e9\ud83d\ude00", "plain"]"#)
        guard case .array(let elements) = root.value else {
            Issue.record("not an array")
            return
        }
        #expect(elements[0].value == .string("a\"b\\c/\n\té😀"))
        #expect(!elements[0].isVerbatim)
        #expect(elements[1].isVerbatim)
        #expect(elements[1].position(ofCharacter: 2) == SourcePosition(line: 1, column: 40))
        #expect(elements[0].position(ofCharacter: 2) == elements[0].position)
    }

    @Test func crlfLineEndsCountOneLineAndABOMIsSkipped() throws {
        let bytes: [UInt8] = [0xEF, 0xBB, 0xBF] + Array("{\r\n  \"a\": 1\r\n}".utf8)
        let root = try PositionedJSON.parse(bytes).get()
        guard case .object(let members) = root.value else {
            Issue.record("not an object")
            return
        }
        #expect(root.position == SourcePosition(line: 1, column: 1))
        #expect(members[0].keyPosition == SourcePosition(line: 2, column: 3))
    }

    @Test func duplicateKeysAreKeptInOrderForTheValidator() throws {
        let root = try parse(#"{"a": 1, "a": 2}"#)
        guard case .object(let members) = root.value else {
            Issue.record("not an object")
            return
        }
        #expect(members.map(\.key) == ["a", "a"])
    }

    static let errors: [(text: String, line: Int, column: Int, reason: String)] = [
        ("", 1, 1, "the file is empty: expected a JSON value"),
        ("{\"a\" 1}", 1, 6, "expected ':' after the key \"a\", found '1'"),
        ("{\"a\": }", 1, 7, "expected a value for the key \"a\", found '}'"),
        ("[1 2]", 1, 4, "expected ',' or ']' after an array element, found '2' (a missing comma?)"),
        ("[,]", 1, 2, "unexpected ',': expected a value or ']'"),
        ("{,}", 1, 2, "unexpected ',': expected a key or '}'"),
        ("[1] [2]", 1, 5, "unexpected '[' after the end of the top-level value"),
        ("\"abc", 1, 5, "unexpected end of file: the string opened at 1:1 is not closed with '\"'"),
        ("\"ab\ncd\"", 1, 4, "the string opened at 1:1 is not closed before the end of the line"),
        ("\"\\u12\"", 1, 2, "\\u must be followed by 4 hex digits"),
        ("\"\\ud800\"", 1, 2, "\\uD800 is a high surrogate without a low surrogate (\\uDC00-\\uDFFF) after it"),
        ("\"\\udc00\"", 1, 2, "\\uDC00 is a low surrogate without a high surrogate before it"),
        ("-", 1, 2, "expected a digit after '-'"),
        ("1.", 1, 3, "expected a digit after '.'"),
        ("1e", 1, 3, "expected a digit in the exponent"),
        ("+1", 1, 1, "a number may not start with '+'"),
        (".5", 1, 1, "a number must start with a digit (write 0.5, not .5)"),
        ("12abc", 1, 3, "unexpected 'a' after the number"),
        (
            "NaN", 1, 1,
            "unexpected word 'NaN': expected a value (a \"string\", a number, true, false, null, an array or an object)"
        ),
        ("/", 1, 1, "unexpected '/': a comment starts with // or /*"),
        ("1 /x", 1, 3, "unexpected '/': a comment starts with // or /*"),
        ("{\"a\": 1,\n \"b\": [1,\n", 3, 1, "unexpected end of file: the array opened at 2:7 is not closed with ']'"),
        ("\u{01}", 1, 1, "unexpected U+0001: expected a value"),
        ("\u{A0}", 1, 1, "unexpected '\u{A0}' (U+00A0): expected a value"),
    ]

    @Test(arguments: errors)
    func syntaxErrorsHaveAPositionAndAReason(_ text: String, _ line: Int, _ column: Int, _ reason: String) {
        let error = syntaxError(Array(text.utf8))
        #expect(error == JSONSyntaxError(position: SourcePosition(line: line, column: column), reason: reason))
    }

    @Test func invalidUTF8IsReportedAtTheBadByte() {
        // "{\n  "é" then a lone continuation byte.
        let bytes: [UInt8] = Array("{\n  \"é".utf8) + [0x80] + Array("\"}".utf8)
        #expect(
            syntaxError(bytes)
                == JSONSyntaxError(
                    position: SourcePosition(line: 2, column: 5),
                    reason: "the file is not valid UTF-8 (byte 0x80 at offset 7)"))
        // Overlong encodings and encoded surrogates are invalid too.
        #expect(syntaxError([0x22, 0xC0, 0xAF, 0x22])?.reason == "the file is not valid UTF-8 (byte 0xC0 at offset 1)")
        #expect(
            syntaxError([0x22, 0xED, 0xA0, 0x80, 0x22])?.reason == "the file is not valid UTF-8 (byte 0xED at offset 1)"
        )
        #expect(syntaxError([0x22, 0xF0, 0x9F, 0x98])?.reason == "the file is not valid UTF-8 (byte 0xF0 at offset 1)")
    }

    @Test func deepNestingIsRefusedNotACrash() {
        let deep = String(repeating: "[", count: 100_000)
        #expect(
            syntaxError(Array(deep.utf8))
                == JSONSyntaxError(
                    position: SourcePosition(line: 1, column: PositionedJSON.maximumDepth + 1),
                    reason: "nesting deeper than \(PositionedJSON.maximumDepth) arrays and objects"))
        let fine = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(syntaxError(Array(fine.utf8)) == nil)
    }
}
