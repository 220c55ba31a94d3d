extension JSONPositionParser {
    // MARK: Whitespace and comments

    mutating func skipWhitespaceAndComments() throws(JSONSyntaxError) {
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
    func unclosedStringHint(_ value: PositionedJSON) -> String? {
        guard case .string(let text) = value.value, text.hasSuffix(",") || text.hasSuffix(", ") else { return nil }
        return " (is the closing quote of the string at \(value.position) missing?)"
    }

    func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }

    func isWordByte(_ byte: UInt8) -> Bool {
        (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || isDigit(byte) || byte == UInt8(ascii: "_")
            || byte == UInt8(ascii: "$")
    }

    /// Reads letters, digits, `_` and `$` (at most 40 shown).
    mutating func readWord() -> String {
        var word = ""
        while let byte = current, isWordByte(byte) {
            if word.utf8.count < 40 { word.unicodeScalars.append(UnicodeScalar(byte)) }
            advance()
        }
        return word
    }

    func describeCurrent() -> String {
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

/// The value of a hex digit in either case, for `\u` escapes.
func hexValue(_ byte: UInt8) -> UInt32? {
    switch byte {
    case 0x30...0x39: UInt32(byte - 0x30)
    case 0x41...0x46: UInt32(byte - 0x41 + 10)
    case 0x61...0x66: UInt32(byte - 0x61 + 10)
    default: nil
    }
}
