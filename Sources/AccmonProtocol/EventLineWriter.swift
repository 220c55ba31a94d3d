/// Writes the line of a `connect` or `disconnect` event directly, byte for byte what ``ProtocolCodec`` writes with
/// JSONEncoder (sorted keys, slashes unescaped), without JSONEncoder's generic machinery: this line is on the hot
/// path, encoded once per event. Keys are static text, written with the string after them in one piece of room;
/// strings are copied in runs between the bytes that need escaping; all into one ``JSONOutput``.
package enum EventLineWriter {
    private static let quote = UInt8(ascii: "\"")
    private static let backslash = UInt8(ascii: "\\")

    static func line(_ event: AccessoryEvent) -> [UInt8] { lineAndAccessory(event).line }

    /// The event's line, and where its accessory object lies in it.
    static func lineAndAccessory(_ event: AccessoryEvent) -> (line: [UInt8], accessory: Range<Int>) {
        var accessoryRange = 0..<0
        let line = JSONOutput.bytes(startingOnTheStack: 1024) { out in
            literal(#"{"accessory":"#, into: &out)
            let start = out.count
            accessory(event.accessory, into: &out)
            accessoryRange = start..<out.count
            if let rejection = event.rejection {
                member(#","rejected":"#, rejection, into: &out)
            }
            literal(#","seq":"#, into: &out)
            number(event.sequence, into: &out)
            member(#","type":"#, event.change.rawValue, into: &out)
            literal("}\n", into: &out)
        }
        return (line, accessoryRange)
    }

    /// The accessory object, its keys in sorted order (``Accessory/Field``).
    package static func accessory(_ accessory: Accessory, into out: inout JSONOutput) {
        var separator = UInt8(ascii: "{")
        for (field, quotedKey) in Accessory.Field.keyed {
            out.append(separator)
            separator = UInt8(ascii: ",")
            quotedKey.withUnsafeBufferPointer { key in
                switch accessory[field] {
                case .text(let text): member(key, text, into: &out)
                case .texts(let texts):
                    out.append(key)
                    strings(texts, into: &out)
                case .number(let number):
                    out.append(key)
                    self.number(number, into: &out)
                }
            }
        }
        out.append(UInt8(ascii: "}"))
    }

    static func strings(_ values: [String], into out: inout JSONOutput) {
        out.append(UInt8(ascii: "["))
        list(values, into: &out) { value, out in string(value, into: &out) }
        out.append(UInt8(ascii: "]"))
    }

    /// `values`, each written by `element`, separated by commas (the brackets or braces around are the caller's).
    package static func list<Element>(
        _ values: [Element], into out: inout JSONOutput, _ element: (Element, inout JSONOutput) -> Void
    ) {
        var isFirst = true
        for value in values {
            if !isFirst { out.append(UInt8(ascii: ",")) }
            isFirst = false
            element(value, &out)
        }
    }

    /// A JSON string as JSONEncoder writes it: `"` and `\` escaped, control characters as `\b \t \n \f \r` or
    /// `\u00xx`, everything else (slashes, DEL, non-ASCII) as UTF-8.
    package static func string(_ value: String, into out: inout JSONOutput) {
        member("", value, into: &out)
    }

    /// `key` (static text: a key with its quotes and colon, and the comma or brace before it), then `value` as a JSON
    /// string (``string(_:into:)``), in one piece of room.
    package static func member(_ key: StaticString, _ value: String, into out: inout JSONOutput) {
        key.withUTF8Buffer { member($0, value, into: &out) }
    }

    /// `key`'s bytes, then `value` as a JSON string, in one piece of room.
    static func member(_ key: UnsafeBufferPointer<UInt8>, _ value: String, into out: inout JSONOutput) {
        // The view's storage is the string's own (a small string's on the stack): no copy of the string is made, as
        // `withUTF8` on a `var` copy would.
        let written: Void? = value.utf8.withContiguousStorageIfAvailable { escaped($0, after: key, into: &out) }
        if written == nil {
            var value = value  // a lazy (bridged) string, made contiguous on a copy
            value.withUTF8 { escaped($0, after: key, into: &out) }
        }
    }

    /// `key`, then `bytes` as a JSON string: runs of bytes that need no escape are copied whole. Room is made first
    /// for the worst case (every byte escaped as six).
    private static func escaped(
        _ bytes: UnsafeBufferPointer<UInt8>, after key: UnsafeBufferPointer<UInt8>, into out: inout JSONOutput
    ) {
        out.append(maximumCount: key.count + 2 + 6 * bytes.count) { start in
            var cursor = start
            if let keyStart = key.baseAddress, key.count > 0 {
                cursor.update(from: keyStart, count: key.count)
                cursor += key.count
            }
            cursor.pointee = quote
            cursor += 1
            var runStart = 0
            for index in bytes.indices {
                let byte = bytes[index]
                guard byte < 0x20 || byte == quote || byte == backslash else { continue }
                if index > runStart {
                    cursor.update(from: bytes.baseAddress! + runStart, count: index - runStart)
                    cursor += index - runStart
                }
                cursor = escape(byte, at: cursor)
                runStart = index + 1
            }
            if bytes.count > runStart {
                cursor.update(from: bytes.baseAddress! + runStart, count: bytes.count - runStart)
                cursor += bytes.count - runStart
            }
            cursor.pointee = quote
            return cursor + 1 - start
        }
    }

    /// Writes the escape of `byte` at `cursor`; returns the position after it.
    private static func escape(_ byte: UInt8, at cursor: UnsafeMutablePointer<UInt8>) -> UnsafeMutablePointer<UInt8> {
        cursor[0] = backslash
        switch byte {
        case quote, backslash: cursor[1] = byte
        case 0x08: cursor[1] = UInt8(ascii: "b")
        case 0x09: cursor[1] = UInt8(ascii: "t")
        case 0x0A: cursor[1] = UInt8(ascii: "n")
        case 0x0C: cursor[1] = UInt8(ascii: "f")
        case 0x0D: cursor[1] = UInt8(ascii: "r")
        default:
            cursor[1] = UInt8(ascii: "u")
            cursor[2] = UInt8(ascii: "0")
            cursor[3] = UInt8(ascii: "0")
            cursor[4] = Hex.lowercaseDigit(byte >> 4)
            cursor[5] = Hex.lowercaseDigit(byte & 0x0F)
            return cursor + 6
        }
        return cursor + 2
    }

    /// A decimal number, without an intermediate string.
    package static func number(_ value: UInt64, into out: inout JSONOutput) {
        var divisor: UInt64 = 1
        while value / divisor >= 10 { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            out.append(UInt8(ascii: "0") + UInt8(rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }

    package static func literal(_ text: StaticString, into out: inout JSONOutput) {
        text.withUTF8Buffer { out.append($0) }
    }
}
