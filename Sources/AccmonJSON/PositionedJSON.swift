/// A place in a text file: a 1-based line and a 1-based column.
///
/// Columns count Unicode scalars (characters, for the text of a manifest), not bytes; a tab counts as one. Lines end
/// at `\n` (a `\r` before it is ordinary whitespace).
public struct SourcePosition: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The line, from 1.
    public var line: Int
    /// The column, from 1.
    public var column: Int

    /// Creates a position.
    public init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    /// The start of a file.
    public static let start = SourcePosition(line: 1, column: 1)

    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.line, lhs.column) < (rhs.line, rhs.column)
    }

    /// `line:column`.
    public var description: String { "\(line):\(column)" }
}

/// A JSON value with the position of every value and key in it, as read by ``PositionedJSON/parse(_:)``.
///
/// The syntax is JSON (RFC 8259) plus the two JSON5 conveniences that help people who edit files by hand:
/// comments (`// to the end of the line` and `/* block */`) and a trailing comma after the last element of an array
/// or the last member of an object. Other JSON5 extensions (single quotes, unquoted keys, hex numbers, `Infinity`)
/// are refused with a message that says what to write instead.
///
/// Objects keep their members in file order, duplicates included, so that a validator can report a duplicate key
/// with its position. Numbers keep their text.
public struct PositionedJSON: Sendable, Hashable {
    /// What a JSON value holds.
    public enum Value: Sendable, Hashable {
        case null
        case bool(Bool)
        /// A number, as written (for example `1`, `-0.5`, `1e3`).
        case number(String)
        case string(String)
        case array([PositionedJSON])
        case object([Member])
    }

    /// One `"key": value` member of an object.
    public struct Member: Sendable, Hashable {
        /// The key, unescaped.
        public var key: String
        /// Where the key's opening quote is.
        public var keyPosition: SourcePosition
        /// The value.
        public var value: PositionedJSON

        public init(key: String, keyPosition: SourcePosition, value: PositionedJSON) {
            self.key = key
            self.keyPosition = keyPosition
            self.value = value
        }
    }

    /// The value.
    public var value: Value
    /// Where the value starts (for a string: its opening quote).
    public var position: SourcePosition
    /// For a string: whether it was written without escapes, so that its `n`th character is at column
    /// `position.column + 1 + n` (see ``position(ofCharacter:)``).
    public var isVerbatim: Bool

    public init(_ value: Value, at position: SourcePosition, isVerbatim: Bool = true) {
        self.value = value
        self.position = position
        self.isVerbatim = isVerbatim
    }

    /// The position of the character at `offset` (counted in Unicode scalars) inside a string value; the position
    /// of the opening quote when the string has escapes or spans no columns for it.
    public func position(ofCharacter offset: Int) -> SourcePosition {
        guard isVerbatim, case .string = value else { return position }
        return SourcePosition(line: position.line, column: position.column + 1 + offset)
    }

    /// What a value of this type is called in messages: "a string", "an object", ...
    public var typeDescription: String {
        switch value {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// The deepest nesting of arrays and objects accepted; deeper input is refused (no stack overflow on hostile
    /// input). A manifest needs 4.
    public static let maximumDepth = 64

    /// Parses `bytes` (UTF-8, an optional byte-order mark) into one value.
    ///
    /// - Returns: the value, or the first syntax error with its position.
    public static func parse(_ bytes: some Collection<UInt8>) -> Result<PositionedJSON, JSONSyntaxError> {
        var parser = JSONPositionParser(Array(bytes))
        do {
            return .success(try parser.parseDocument())
        } catch {
            return .failure(error)
        }
    }
}

/// A syntax error in JSON text: where, and what was wrong.
public struct JSONSyntaxError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Where the problem is.
    public var position: SourcePosition
    /// What is wrong, for people.
    public var reason: String

    public init(position: SourcePosition, reason: String) {
        self.position = position
        self.reason = reason
    }

    /// `line:column: reason`.
    public var description: String { "\(position): \(reason)" }
}

/// The recursive-descent parser behind ``PositionedJSON/parse(_:)``: one pass over the bytes, tracking line and
/// column.
struct JSONPositionParser {
    private let bytes: [UInt8]
    private var index = 0
    private var line = 1
    private var column = 1
    private var depth = 0

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    private var position: SourcePosition { SourcePosition(line: line, column: column) }
    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    /// Moves past one byte; a column is counted at each byte that starts a UTF-8 sequence.
    private mutating func advance() {
        let byte = bytes[index]
        index += 1
        if byte == 0x0A {
            line += 1
            column = 1
        } else if byte & 0xC0 != 0x80 {
            column += 1
        }
    }

    private func fail(_ reason: String, at position: SourcePosition) -> JSONSyntaxError {
        JSONSyntaxError(position: position, reason: reason)
    }

    mutating func parseDocument() throws(JSONSyntaxError) -> PositionedJSON {
        if let offset = firstInvalidUTF8Offset(bytes) {
            // Positions count scalars, so walk to the bad byte first.
            while index < offset { advance() }
            throw fail(
                "the file is not valid UTF-8 (byte 0x\(uppercaseHex(UInt32(bytes[offset]), digits: 2)) at offset \(offset))", at: position)
        }
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) {
            index = 3  // A byte-order mark is not a character of the text: columns stay as they are.
        }
        try skipWhitespaceAndComments()
        guard current != nil else { throw fail("the file is empty: expected a JSON value", at: position) }
        let value = try parseValue()
        try skipWhitespaceAndComments()
        if current != nil {
            throw fail("unexpected \(describeCurrent()) after the end of the top-level value", at: position)
        }
        return value
    }

    // MARK: Values

    private mutating func parseValue() throws(JSONSyntaxError) -> PositionedJSON {
        let start = position
        guard let byte = current else { throw fail("unexpected end of file: expected a value", at: start) }
        switch byte {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""):
            let (text, verbatim) = try parseString()
            return PositionedJSON(.string(text), at: start, isVerbatim: verbatim)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return PositionedJSON(.number(try parseNumber()), at: start)
        case UInt8(ascii: "'"):
            throw fail("single quotes do not make a string in JSON: use double quotes", at: start)
        case UInt8(ascii: "+"):
            throw fail("a number may not start with '+'", at: start)
        case UInt8(ascii: "."):
            throw fail("a number must start with a digit (write 0.5, not .5)", at: start)
        default:
            if isWordByte(byte) {
                let word = readWord()
                switch word {
                case "true": return PositionedJSON(.bool(true), at: start)
                case "false": return PositionedJSON(.bool(false), at: start)
                case "null": return PositionedJSON(.null, at: start)
                default:
                    throw fail(
                        "unexpected word '\(word)': expected a value (a \"string\", a number, true, false, null, "
                            + "an array or an object)", at: start)
                }
            }
            throw fail("unexpected \(describeCurrent()): expected a value", at: start)
        }
    }

    private mutating func enter(_ opening: SourcePosition) throws(JSONSyntaxError) {
        depth += 1
        if depth > PositionedJSON.maximumDepth {
            throw fail("nesting deeper than \(PositionedJSON.maximumDepth) arrays and objects", at: opening)
        }
    }

    private mutating func parseObject() throws(JSONSyntaxError) -> PositionedJSON {
        let opening = position
        try enter(opening)
        advance()  // {
        var members: [PositionedJSON.Member] = []
        while true {
            try skipWhitespaceAndComments()
            let keyStart = position
            guard let byte = current else {
                throw fail(
                    "unexpected end of file: the object opened at \(opening) is not closed with '}'", at: keyStart)
            }
            if byte == UInt8(ascii: "}") {
                advance()
                break
            }
            let key: String
            switch byte {
            case UInt8(ascii: "\""):
                key = try parseString().text
            case UInt8(ascii: "'"):
                throw fail("single quotes do not make a key in JSON: use double quotes", at: keyStart)
            case UInt8(ascii: ","):
                throw fail(
                    members.isEmpty ? "unexpected ',': expected a key or '}'" : "unexpected ',': two commas in a row",
                    at: keyStart)
            default:
                if isWordByte(byte) {
                    let word = readWord()
                    throw fail("a key must be a string in double quotes: write \"\(word)\"", at: keyStart)
                }
                throw fail("unexpected \(describeCurrent()): expected a key in double quotes or '}'", at: keyStart)
            }
            try skipWhitespaceAndComments()
            guard current == UInt8(ascii: ":") else {
                if current == nil {
                    throw fail("unexpected end of file: expected ':' after the key \"\(shown(key))\"", at: position)
                }
                throw fail("expected ':' after the key \"\(shown(key))\", found \(describeCurrent())", at: position)
            }
            advance()
            try skipWhitespaceAndComments()
            if current == UInt8(ascii: ",") || current == UInt8(ascii: "}") {
                throw fail("expected a value for the key \"\(shown(key))\", found \(describeCurrent())", at: position)
            }
            let value = try parseValue()
            members.append(PositionedJSON.Member(key: key, keyPosition: keyStart, value: value))
            try skipWhitespaceAndComments()
            guard let next = current else {
                throw fail(
                    "unexpected end of file: the object opened at \(opening) is not closed with '}'", at: position)
            }
            if next == UInt8(ascii: ",") {
                advance()
            } else if next == UInt8(ascii: "}") {
                advance()
                break
            } else if let hint = unclosedStringHint(value) {
                throw fail(
                    "expected ',' or '}' after the value of \"\(shown(key))\", found \(describeCurrent())\(hint)",
                    at: position)
            } else if next == UInt8(ascii: "\"") {
                throw fail(
                    "expected ',' or '}' after the value of \"\(shown(key))\", found '\"' (a missing comma?)",
                    at: position)
            } else {
                throw fail(
                    "expected ',' or '}' after the value of \"\(shown(key))\", found \(describeCurrent())", at: position
                )
            }
        }
        depth -= 1
        return PositionedJSON(.object(members), at: opening)
    }

    private mutating func parseArray() throws(JSONSyntaxError) -> PositionedJSON {
        let opening = position
        try enter(opening)
        advance()  // [
        var elements: [PositionedJSON] = []
        while true {
            try skipWhitespaceAndComments()
            guard let byte = current else {
                throw fail(
                    "unexpected end of file: the array opened at \(opening) is not closed with ']'", at: position)
            }
            if byte == UInt8(ascii: "]") {
                advance()
                break
            }
            if byte == UInt8(ascii: ",") {
                throw fail(
                    elements.isEmpty
                        ? "unexpected ',': expected a value or ']'" : "unexpected ',': two commas in a row",
                    at: position)
            }
            elements.append(try parseValue())
            try skipWhitespaceAndComments()
            guard let next = current else {
                throw fail(
                    "unexpected end of file: the array opened at \(opening) is not closed with ']'", at: position)
            }
            if next == UInt8(ascii: ",") {
                advance()
            } else if next == UInt8(ascii: "]") {
                advance()
                break
            } else if next == UInt8(ascii: "}") {
                throw fail("unexpected '}': the array opened at \(opening) must be closed with ']'", at: position)
            } else if let hint = unclosedStringHint(elements.last!) {
                throw fail(
                    "expected ',' or ']' after an array element, found \(describeCurrent())\(hint)", at: position)
            } else {
                throw fail(
                    "expected ',' or ']' after an array element, found \(describeCurrent()) (a missing comma?)",
                    at: position)
            }
        }
        depth -= 1
        return PositionedJSON(.array(elements), at: opening)
    }

    /// Reads a string at its opening quote; returns its text and whether it had no escapes.
    private mutating func parseString() throws(JSONSyntaxError) -> (text: String, verbatim: Bool) {
        let opening = position
        advance()  // "
        var scalars = String.UnicodeScalarView()
        var verbatim = true
        var runStart = index
        func flush(_ end: Int) {
            if end > runStart {
                scalars.append(contentsOf: String(decoding: bytes[runStart..<end], as: UTF8.self).unicodeScalars)
            }
        }
        while true {
            guard let byte = current else {
                throw fail(
                    "unexpected end of file: the string opened at \(opening) is not closed with '\"'", at: position)
            }
            switch byte {
            case UInt8(ascii: "\""):
                flush(index)
                advance()
                return (String(scalars), verbatim)
            case UInt8(ascii: "\\"):
                flush(index)
                verbatim = false
                scalars.append(try parseEscape())
                runStart = index
            case 0x0A:
                throw fail("the string opened at \(opening) is not closed before the end of the line", at: position)
            case 0x00..<0x20:
                throw fail(
                    "control character U+\(uppercaseHex(UInt32(byte), digits: 4)) in a string: write it as an escape such as \\t or "
                        + "\\u\(uppercaseHex(UInt32(byte), digits: 4))", at: position)
            default:
                advance()
            }
        }
    }

    private mutating func parseEscape() throws(JSONSyntaxError) -> Unicode.Scalar {
        let start = position
        advance()  // backslash
        guard let byte = current else { throw fail("unexpected end of file in an escape", at: start) }
        advance()
        switch byte {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let high = try parseHex4(escapeStart: start)
            if (0xDC00...0xDFFF).contains(high) {
                throw fail("\\u\(uppercaseHex(high, digits: 4)) is a low surrogate without a high surrogate before it", at: start)
            }
            if (0xD800...0xDBFF).contains(high) {
                let lowStart = position
                guard current == UInt8(ascii: "\\"), index + 1 < bytes.count, bytes[index + 1] == UInt8(ascii: "u")
                else {
                    throw fail(
                        "\\u\(uppercaseHex(high, digits: 4)) is a high surrogate without a low surrogate (\\uDC00-\\uDFFF) after it",
                        at: start)
                }
                advance()
                advance()
                let low = try parseHex4(escapeStart: lowStart)
                guard (0xDC00...0xDFFF).contains(low) else {
                    throw fail(
                        "\\u\(uppercaseHex(high, digits: 4)) is a high surrogate without a low surrogate (\\uDC00-\\uDFFF) after it",
                        at: start)
                }
                return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))!
            }
            return Unicode.Scalar(high)!
        default:
            let shown = byte >= 0x20 && byte < 0x7F ? String(UnicodeScalar(byte)) : "U+\(uppercaseHex(UInt32(byte), digits: 4))"
            throw fail("invalid escape '\\\(shown)' (valid: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)", at: start)
        }
    }

    private mutating func parseHex4(escapeStart: SourcePosition) throws(JSONSyntaxError) -> UInt32 {
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let byte = current, let digit = hexValue(byte) else {
                throw fail("\\u must be followed by 4 hex digits", at: escapeStart)
            }
            value = value << 4 | digit
            advance()
        }
        return value
    }

    private mutating func parseNumber() throws(JSONSyntaxError) -> String {
        let start = index
        let startPosition = position
        if current == UInt8(ascii: "-") { advance() }
        guard let first = current, isDigit(first) else {
            throw fail("expected a digit after '-'", at: position)
        }
        if first == UInt8(ascii: "0") {
            advance()
            if let next = current, next == UInt8(ascii: "x") || next == UInt8(ascii: "X") {
                throw fail("hex numbers are not JSON: write ids as strings, such as \"0403\"", at: startPosition)
            }
            if let next = current, isDigit(next) {
                var digits = "0"
                while let byte = current, isDigit(byte) {
                    digits.unicodeScalars.append(UnicodeScalar(byte))
                    advance()
                }
                throw fail(
                    "a number may not have leading zeros: write ids as strings, such as \"\(digits)\"",
                    at: startPosition)
            }
        } else {
            while let byte = current, isDigit(byte) { advance() }
        }
        if current == UInt8(ascii: ".") {
            advance()
            guard let byte = current, isDigit(byte) else { throw fail("expected a digit after '.'", at: position) }
            while let byte = current, isDigit(byte) { advance() }
        }
        if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
            advance()
            if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { advance() }
            guard let byte = current, isDigit(byte) else {
                throw fail("expected a digit in the exponent", at: position)
            }
            while let byte = current, isDigit(byte) { advance() }
        }
        if let byte = current, isWordByte(byte) {
            throw fail("unexpected \(describeCurrent()) after the number", at: position)
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    // MARK: Whitespace and comments

    private mutating func skipWhitespaceAndComments() throws(JSONSyntaxError) {
        while let byte = current {
            switch byte {
            case 0x20, 0x09, 0x0A, 0x0D:
                advance()
            case UInt8(ascii: "/"):
                let start = position
                guard index + 1 < bytes.count else {
                    throw fail("unexpected '/': a comment starts with // or /*", at: start)
                }
                switch bytes[index + 1] {
                case UInt8(ascii: "/"):
                    while let byte = current, byte != 0x0A { advance() }
                case UInt8(ascii: "*"):
                    advance()
                    advance()
                    while true {
                        guard let byte = current else {
                            throw fail("the comment opened with '/*' at \(start) is not closed with '*/'", at: start)
                        }
                        advance()
                        if byte == UInt8(ascii: "*"), current == UInt8(ascii: "/") {
                            advance()
                            break
                        }
                    }
                default:
                    throw fail("unexpected '/': a comment starts with // or /*", at: start)
                }
            case UInt8(ascii: "#"):
                throw fail("'#' does not start a comment: use // or /* */", at: position)
            default:
                return
            }
        }
    }

    // MARK: Helpers

    /// A hint for text right after a string that ends with a comma, as in `"abc, "next"`: its closing quote is
    /// probably missing.
    private func unclosedStringHint(_ value: PositionedJSON) -> String? {
        guard case .string(let text) = value.value, text.hasSuffix(",") || text.hasSuffix(", ") else { return nil }
        return " (is the closing quote of the string at \(value.position) missing?)"
    }

    private func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }

    private func isWordByte(_ byte: UInt8) -> Bool {
        (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || isDigit(byte) || byte == UInt8(ascii: "_")
            || byte == UInt8(ascii: "$")
    }

    /// Reads letters, digits, `_` and `$` (at most 40 shown).
    private mutating func readWord() -> String {
        var word = ""
        while let byte = current, isWordByte(byte) {
            if word.utf8.count < 40 { word.unicodeScalars.append(UnicodeScalar(byte)) }
            advance()
        }
        return word
    }

    private func describeCurrent() -> String {
        guard let byte = current else { return "end of file" }
        if byte >= 0x21 && byte < 0x7F { return "'\(UnicodeScalar(byte))'" }
        if byte < 0x80 { return "U+\(uppercaseHex(UInt32(byte), digits: 4))" }
        // The first scalar of a valid UTF-8 sequence.
        let end = min(bytes.count, index + 4)
        let scalar = String(decoding: bytes[index..<end], as: UTF8.self).unicodeScalars.first!
        if isControl(scalar) { return "U+\(uppercaseHex(scalar.value, digits: 4))" }
        return "'\(scalar)' (U+\(uppercaseHex(scalar.value, digits: 4)))"
    }
}

/// User text for a message: control characters escaped (so that a problem stays one line) and at most `limit`
/// characters, the rest shown as `…`.
public func shown(_ text: String, limit: Int = 64) -> String {
    let cut = text.unicodeScalars.count > limit
    let kept = cut ? String(String.UnicodeScalarView(text.unicodeScalars.prefix(limit))) : text
    return escapingControlCharacters(kept) + (cut ? "…" : "")
}

/// `text` with C0 and C1 control characters, DEL and line or paragraph separators written as `\n`, `\t` or
/// `\u{XX}`.
public func escapingControlCharacters(_ text: String) -> String {
    guard text.unicodeScalars.contains(where: isControl) else { return text }
    var out = String.UnicodeScalarView()
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\n": out.append(contentsOf: "\\n".unicodeScalars)
        case "\t": out.append(contentsOf: "\\t".unicodeScalars)
        case "\r": out.append(contentsOf: "\\r".unicodeScalars)
        case _ where isControl(scalar):
            out.append(contentsOf: "\\u{\(String(scalar.value, radix: 16, uppercase: true))}".unicodeScalars)
        default: out.append(scalar)
        }
    }
    return String(out)
}

func isControl(_ scalar: Unicode.Scalar) -> Bool {
    scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029
}

/// The offset of the first byte that is not part of valid UTF-8 (overlong forms and surrogates are invalid), or
/// `nil`.
func firstInvalidUTF8Offset(_ bytes: [UInt8]) -> Int? {
    var index = 0
    while index < bytes.count {
        let lead = bytes[index]
        let length: Int
        let minimum: UInt32
        var value: UInt32
        switch lead {
        case 0x00...0x7F:
            index += 1
            continue
        case 0xC2...0xDF: (length, minimum, value) = (2, 0x80, UInt32(lead & 0x1F))
        case 0xE0...0xEF: (length, minimum, value) = (3, 0x800, UInt32(lead & 0x0F))
        case 0xF0...0xF4: (length, minimum, value) = (4, 0x10000, UInt32(lead & 0x07))
        default: return index
        }
        guard index + length <= bytes.count else { return index }
        for offset in 1..<length {
            let byte = bytes[index + offset]
            guard byte & 0xC0 == 0x80 else { return index }
            value = value << 6 | UInt32(byte & 0x3F)
        }
        if value < minimum || value > 0x10FFFF || (0xD800...0xDFFF).contains(value) { return index }
        index += length
    }
    return nil
}

/// The value of a hex digit in either case, for `\u` escapes.
private func hexValue(_ byte: UInt8) -> UInt32? {
    switch byte {
    case 0x30...0x39: UInt32(byte - 0x30)
    case 0x41...0x46: UInt32(byte - 0x41 + 10)
    case 0x61...0x66: UInt32(byte - 0x61 + 10)
    default: nil
    }
}

/// `value` in uppercase hex digits, zero-padded to at least `digits`, for messages (`U+00E9`, `0xC3`).
func uppercaseHex(_ value: UInt32, digits: Int) -> String {
    let text = String(value, radix: 16, uppercase: true)
    return String(repeating: "0", count: max(0, digits - text.count)) + text
}
