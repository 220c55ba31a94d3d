/// The recursive-descent parser behind ``PositionedJSON/parse(_:)``: one pass over the bytes, tracking line and
/// column.
struct JSONPositionParser {
    let bytes: [UInt8]
    var index = 0
    var line = 1
    var column = 1
    var depth = 0

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    var position: SourcePosition { SourcePosition(line: line, column: column) }
    var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    /// Moves past one byte; a column is counted at each byte that starts a UTF-8 sequence.
    mutating func advance() {
        let byte = bytes[index]
        index += 1
        if byte == 0x0A {
            line += 1
            column = 1
        } else if byte & 0xC0 != 0x80 {
            column += 1
        }
    }

    func fail(_ reason: String, at position: SourcePosition) -> JSONSyntaxError {
        JSONSyntaxError(position: position, reason: reason)
    }

    mutating func parseDocument() throws(JSONSyntaxError) -> PositionedJSON {
        if let offset = firstInvalidUTF8Offset(bytes) {
            // Positions count scalars, so walk to the bad byte first.
            while index < offset { advance() }
            throw fail(
                "the file is not valid UTF-8 (byte 0x\(uppercaseHex(UInt32(bytes[offset]), digits: 2)) at offset \(offset))",
                at: position)
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

    mutating func parseValue() throws(JSONSyntaxError) -> PositionedJSON {
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

    mutating func enter(_ opening: SourcePosition) throws(JSONSyntaxError) {
        depth += 1
        if depth > PositionedJSON.maximumDepth {
            throw fail("nesting deeper than \(PositionedJSON.maximumDepth) arrays and objects", at: opening)
        }
    }

    mutating func parseObject() throws(JSONSyntaxError) -> PositionedJSON {
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

    mutating func parseArray() throws(JSONSyntaxError) -> PositionedJSON {
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
    mutating func parseString() throws(JSONSyntaxError) -> (text: String, verbatim: Bool) {
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

    mutating func parseEscape() throws(JSONSyntaxError) -> Unicode.Scalar {
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
                throw fail(
                    "\\u\(uppercaseHex(high, digits: 4)) is a low surrogate without a high surrogate before it",
                    at: start)
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
            let shown =
                byte >= 0x20 && byte < 0x7F ? String(UnicodeScalar(byte)) : "U+\(uppercaseHex(UInt32(byte), digits: 4))"
            throw fail("invalid escape '\\\(shown)' (valid: \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)", at: start)
        }
    }

    mutating func parseHex4(escapeStart: SourcePosition) throws(JSONSyntaxError) -> UInt32 {
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

    mutating func parseNumber() throws(JSONSyntaxError) -> String {
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
}
