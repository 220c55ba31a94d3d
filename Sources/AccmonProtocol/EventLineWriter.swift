/// Writes the line of a `connect` or `disconnect` event directly, byte for byte what ``ProtocolCodec`` writes with
/// JSONEncoder (sorted keys, slashes unescaped), without JSONEncoder's generic machinery: this line is on the hot
/// path, encoded once per event. Keys are static text, written with the string after them in one piece of room;
/// strings are copied eight bytes at a time where none needs escaping; all into one ``JSONOutput``.
package enum EventLineWriter {
    private static let quote = UInt8(ascii: "\"")
    private static let backslash = UInt8(ascii: "\\")

    static func line(_ event: AccessoryEvent) -> [UInt8] {
        JSONOutput.bytes(startingOnTheStack: 1024) { out in
            literal(#"{"accessory":"#, into: &out)
            accessory(event.accessory, into: &out)
            if let rejection = event.rejection {
                member(#","rejected":"#, rejection, into: &out)
            }
            literal(#","seq":"#, into: &out)
            number(event.sequence, into: &out)
            member(#","type":"#, event.change.rawValue, into: &out)
            literal("}\n", into: &out)
        }
    }

    /// The accessory object, its keys in sorted order.
    package static func accessory(_ accessory: Accessory, into out: inout JSONOutput) {
        member(#"{"accessoryID":"#, accessory.accessoryID, into: &out)
        literal(#","connectionID":"#, into: &out)
        number(accessory.connectionID.rawValue, into: &out)
        member(#","descriptorsSHA256":"#, accessory.descriptorsSHA256, into: &out)
        literal(#","deviceNodes":"#, into: &out)
        strings(accessory.deviceNodes, into: &out)
        member(#","firmwareRevision":"#, accessory.firmwareRevision, into: &out)
        member(#","hardwareRevision":"#, accessory.hardwareRevision, into: &out)
        member(#","interfaceNumber":"#, accessory.interfaceNumber, into: &out)
        member(#","kind":"#, accessory.kind.rawValue, into: &out)
        member(#","manufacturer":"#, accessory.manufacturer, into: &out)
        member(#","modelNumber":"#, accessory.modelNumber, into: &out)
        member(#","name":"#, accessory.name, into: &out)
        member(#","portPath":"#, accessory.portPath, into: &out)
        member(#","productID":"#, accessory.productID, into: &out)
        literal(#","protocolStrings":"#, into: &out)
        strings(accessory.protocolStrings, into: &out)
        member(#","serialNumber":"#, accessory.serialNumber, into: &out)
        member(#","sysfsPath":"#, accessory.sysfsPath, into: &out)
        member(#","vendorID":"#, accessory.vendorID, into: &out)
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
        // The view's storage is the string's own (a small string's on the stack): no copy of the string is made, as
        // `withUTF8` on a `var` copy would.
        let written: Void? = value.utf8.withContiguousStorageIfAvailable { escaped($0, after: key, into: &out) }
        if written == nil {
            var value = value  // a lazy (bridged) string, made contiguous on a copy
            value.withUTF8 { escaped($0, after: key, into: &out) }
        }
    }

    /// `key`, then `bytes` as a JSON string, eight bytes at a time: a word without a byte to escape is stored as it
    /// is, a word with one byte by byte. The last one to seven bytes are tested as one word too, padded with spaces
    /// (which need no escape), and stored whole, the padding after the string's end overwritten by what follows: most
    /// of an event's strings are shorter than eight bytes. Room is made first for the worst case (every byte six) and
    /// the padding.
    private static func escaped(
        _ bytes: UnsafeBufferPointer<UInt8>, after key: StaticString, into out: inout JSONOutput
    ) {
        out.append(maximumCount: key.utf8CodeUnitCount + 2 + 6 * bytes.count + 8) { start in
            var cursor = start
            if key.utf8CodeUnitCount > 0 {
                cursor.update(from: key.utf8Start, count: key.utf8CodeUnitCount)
                cursor += key.utf8CodeUnitCount
            }
            cursor.pointee = quote
            cursor += 1
            var index = 0
            while index < bytes.count {
                let remaining = bytes.count - index
                let word =
                    remaining >= 8
                    ? ByteScan.word(bytes, at: index) : ByteScan.paddedWord(bytes, from: index, with: 0x20)
                let count = min(remaining, 8)
                if !ByteScan.hasJSONSpecial(word) {
                    UnsafeMutableRawPointer(cursor).storeBytes(of: word.littleEndian, as: UInt64.self)
                    cursor += count
                } else {
                    for byte in bytes[index..<index + count] {
                        if byte < 0x20 || byte == quote || byte == backslash {
                            cursor = escape(byte, at: cursor)
                        } else {
                            cursor.pointee = byte
                            cursor += 1
                        }
                    }
                }
                index += count
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
