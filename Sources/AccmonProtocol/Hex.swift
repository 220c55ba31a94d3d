/// Hexadecimal digits as ASCII bytes, for the parsers and writers of the protocol, the devices and the manifest.
package enum Hex {
    /// The value of a hex digit in either case; `nil` for any other byte.
    @inlinable package static func value(of byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// The value of a lowercase hex digit; `nil` for any other byte, uppercase digits included.
    @inlinable package static func lowercaseValue(of byte: UInt8) -> UInt8? {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F") ? nil : value(of: byte)
    }

    /// Whether `byte` is a hex digit in either case.
    @inlinable package static func isDigit(_ byte: UInt8) -> Bool { value(of: byte) != nil }

    /// Whether `byte` is a lowercase hex digit.
    @inlinable package static func isLowercaseDigit(_ byte: UInt8) -> Bool { lowercaseValue(of: byte) != nil }

    /// The lowercase digit for a value below 16, as an ASCII byte.
    @inlinable package static func lowercaseDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }

    /// `value` as exactly `digits` lowercase digits, zero-padded (`value` must fit).
    package static func lowercase(_ value: Int, digits: Int) -> String {
        String(unsafeUninitializedCapacity: digits) { bytes in
            var rest = value
            for index in stride(from: digits - 1, through: 0, by: -1) {
                bytes[index] = lowercaseDigit(UInt8(rest & 0xF))
                rest >>= 4
            }
            return digits
        }
    }

    /// `value` as uppercase digits, zero-padded to at least `digits` (as in `U+00E9`).
    package static func uppercase(_ value: UInt32, digits: Int) -> String {
        let text = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }

    /// A vendor or product id of exactly four hex digits, in lowercase; `nil` for any other text.
    package static func usbID(_ text: String) -> String? {
        guard text.utf8.count == 4, let value = UInt16(text, radix: 16) else { return nil }
        return lowercase(Int(value), digits: 4)
    }
}
