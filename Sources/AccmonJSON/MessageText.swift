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

/// `value` in uppercase hex digits, zero-padded to at least `digits`, for messages (`U+00E9`, `0xC3`).
func uppercaseHex(_ value: UInt32, digits: Int) -> String {
    let text = String(value, radix: 16, uppercase: true)
    return String(repeating: "0", count: max(0, digits - text.count)) + text
}
