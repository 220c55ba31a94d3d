/// Reads JSON strings and integers from bytes, for the hand-written line readers (``EventLineReader``,
/// ``RequestLineReader``).
enum JSONTokenScanner {
    /// The escapes a reader takes.
    enum Escapes {
        /// Every JSON escape (RFC 8259): `\" \\ \/ \b \f \n \r \t`, and `\uXXXX` in either case, surrogate pairs
        /// included.
        case json
        /// Only those ``EventLineWriter`` writes: `\" \\ \b \t \n \f \r`, and `\u00xx` in lowercase for the other
        /// control characters, so that a string read is the writer's string byte for byte.
        case eventLineWriter
    }

    /// The string whose opening quote is at `position`, unescaped, holding valid UTF-8; `position` moves past its
    /// closing quote. `nil` when there is no such string there (`position` is then anywhere).
    static func string(in bytes: UnsafeBufferPointer<UInt8>, at position: inout Int, escapes: Escapes) -> String? {
        guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { return nil }
        position += 1
        let start = position
        // Most strings have no escape: find the closing quote, and make the string from the bytes in place. Eight
        // bytes at a time up to the word that holds the quote (or an escape).
        var words: UInt64 = 0
        while position + 8 <= bytes.count {
            let word = ByteScan.word(bytes, at: position)
            if ByteScan.hasJSONSpecial(word) { break }
            words |= word
            position += 8
        }
        // Of the bytes, to tell ASCII text, which needs no validation.
        var union: UInt8 = ByteScan.hasNonASCII(words) ? 0x80 : 0
        while position < bytes.count {
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                let text = UnsafeBufferPointer(rebasing: bytes[start..<position - 1])
                return union < 0x80 ? String(decoding: text, as: UTF8.self) : String(validating: text, as: UTF8.self)
            case UInt8(ascii: "\\"):
                return escapedString(in: bytes, from: start, at: &position, escapes: escapes)
            case 0..<0x20:
                return nil
            default:
                union |= byte
                position += 1
            }
        }
        return nil
    }

    /// The integer at `position` as JSON writes a plain one (`0`, or digits without a leading zero), when it fits in a
    /// `UInt64`; `position` moves past its digits. `nil` when there are no digits, a leading zero, or an overflow.
    static func unsignedInteger(in bytes: UnsafeBufferPointer<UInt8>, at position: inout Int) -> UInt64? {
        let start = position
        var value: UInt64 = 0
        while position < bytes.count {
            let digit = bytes[position] &- UInt8(ascii: "0")
            guard digit < 10 else { break }
            let (times10, overflow) = value.multipliedReportingOverflow(by: 10)
            let (sum, carry) = times10.addingReportingOverflow(UInt64(digit))
            guard !overflow, !carry else { return nil }
            value = sum
            position += 1
        }
        let length = position - start
        guard length > 0, length == 1 || bytes[start] != UInt8(ascii: "0") else { return nil }
        return value
    }

    /// The rest of a string from its first backslash (at `position`) on; `start` is its first byte after the quote.
    private static func escapedString(
        in bytes: UnsafeBufferPointer<UInt8>, from start: Int, at position: inout Int, escapes: Escapes
    ) -> String? {
        var unescaped = Array(UnsafeBufferPointer(rebasing: bytes[start..<position]))
        while position < bytes.count {
            let byte = bytes[position]
            position += 1
            switch byte {
            case UInt8(ascii: "\""):
                return String(validating: unescaped, as: UTF8.self)
            case UInt8(ascii: "\\"):
                guard position < bytes.count else { return nil }
                let escape = bytes[position]
                position += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): unescaped.append(escape)
                case UInt8(ascii: "/") where escapes == .json: unescaped.append(escape)
                case UInt8(ascii: "b"): unescaped.append(0x08)
                case UInt8(ascii: "f"): unescaped.append(0x0C)
                case UInt8(ascii: "n"): unescaped.append(0x0A)
                case UInt8(ascii: "r"): unescaped.append(0x0D)
                case UInt8(ascii: "t"): unescaped.append(0x09)
                case UInt8(ascii: "u") where escapes == .json:
                    guard let scalar = escapedScalar(in: bytes, at: &position) else { return nil }
                    unescaped.append(contentsOf: UTF8.encode(scalar)!)
                case UInt8(ascii: "u"):
                    guard let control = writersControlCharacter(in: bytes, at: &position) else { return nil }
                    unescaped.append(control)
                default: return nil
                }
            case 0..<0x20:
                return nil
            default:
                unescaped.append(byte)
            }
        }
        return nil
    }

    /// After `\u`: four hex digits naming a scalar, or a high surrogate and `\u` with the low one that completes it.
    private static func escapedScalar(in bytes: UnsafeBufferPointer<UInt8>, at position: inout Int) -> Unicode.Scalar? {
        guard let unit = hexCodeUnit(in: bytes, at: &position) else { return nil }
        switch unit {
        case 0xD800..<0xDC00:
            guard bytes.count - position >= 2, bytes[position] == UInt8(ascii: "\\"),
                bytes[position + 1] == UInt8(ascii: "u")
            else { return nil }
            position += 2
            guard let low = hexCodeUnit(in: bytes, at: &position), (0xDC00..<0xE000).contains(low) else { return nil }
            return Unicode.Scalar(0x10000 + (UInt32(unit - 0xD800) << 10) + UInt32(low - 0xDC00))
        case 0xDC00..<0xE000:
            return nil
        default:
            return Unicode.Scalar(unit)
        }
    }

    /// Four hex digits, in either case.
    private static func hexCodeUnit(in bytes: UnsafeBufferPointer<UInt8>, at position: inout Int) -> UInt16? {
        guard bytes.count - position >= 4 else { return nil }
        var unit: UInt16 = 0
        for _ in 0..<4 {
            guard let digit = Hex.value(of: bytes[position]) else { return nil }
            unit = unit << 4 | UInt16(digit)
            position += 1
        }
        return unit
    }

    /// After `\u`, as ``EventLineWriter`` writes it: `00` and two lowercase hex digits naming a control character
    /// that has no short escape.
    private static func writersControlCharacter(in bytes: UnsafeBufferPointer<UInt8>, at position: inout Int) -> UInt8?
    {
        guard bytes.count - position >= 4, bytes[position] == UInt8(ascii: "0"),
            bytes[position + 1] == UInt8(ascii: "0"),
            let high = Hex.lowercaseValue(of: bytes[position + 2]),
            let low = Hex.lowercaseValue(of: bytes[position + 3])
        else { return nil }
        position += 4
        let value = high << 4 | low
        switch value {
        case 0x08, 0x09, 0x0A, 0x0C, 0x0D, 0x20...: return nil
        default: return value
        }
    }
}
