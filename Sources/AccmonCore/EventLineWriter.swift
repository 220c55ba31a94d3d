/// Writes the line of a `connect` or `disconnect` event directly, byte for byte what ``ProtocolCodec`` writes with
/// JSONEncoder (sorted keys, slashes unescaped), without JSONEncoder's generic machinery: this line is on the hot
/// path, encoded once per event. Keys are static text, strings are copied in runs between the bytes that need
/// escaping, all into one ``JSONOutput``.
package enum EventLineWriter {
    private static let quote = UInt8(ascii: "\"")
    private static let backslash = UInt8(ascii: "\\")

    static func line(_ event: AccessoryEvent) -> [UInt8] {
        JSONOutput.bytes(startingOnTheStack: 1024) { out in
            literal(#"{"accessory":"#, into: &out)
            accessory(event.accessory, into: &out)
            if let rejection = event.rejection {
                literal(#","rejected":"#, into: &out)
                string(rejection, into: &out)
            }
            literal(#","seq":"#, into: &out)
            number(event.sequence, into: &out)
            literal(#","type":"#, into: &out)
            string(event.change.rawValue, into: &out)
            literal("}\n", into: &out)
        }
    }

    /// The accessory object, its keys in sorted order.
    package static func accessory(_ accessory: Accessory, into out: inout JSONOutput) {
        literal(#"{"accessoryID":"#, into: &out)
        string(accessory.accessoryID, into: &out)
        literal(#","connectionID":"#, into: &out)
        number(accessory.connectionID.rawValue, into: &out)
        literal(#","descriptorsSHA256":"#, into: &out)
        string(accessory.descriptorsSHA256, into: &out)
        literal(#","deviceNodes":"#, into: &out)
        strings(accessory.deviceNodes, into: &out)
        literal(#","firmwareRevision":"#, into: &out)
        string(accessory.firmwareRevision, into: &out)
        literal(#","hardwareRevision":"#, into: &out)
        string(accessory.hardwareRevision, into: &out)
        literal(#","interfaceNumber":"#, into: &out)
        string(accessory.interfaceNumber, into: &out)
        literal(#","kind":"#, into: &out)
        string(accessory.kind.rawValue, into: &out)
        literal(#","manufacturer":"#, into: &out)
        string(accessory.manufacturer, into: &out)
        literal(#","modelNumber":"#, into: &out)
        string(accessory.modelNumber, into: &out)
        literal(#","name":"#, into: &out)
        string(accessory.name, into: &out)
        literal(#","portPath":"#, into: &out)
        string(accessory.portPath, into: &out)
        literal(#","productID":"#, into: &out)
        string(accessory.productID, into: &out)
        literal(#","protocolStrings":"#, into: &out)
        strings(accessory.protocolStrings, into: &out)
        literal(#","serialNumber":"#, into: &out)
        string(accessory.serialNumber, into: &out)
        literal(#","sysfsPath":"#, into: &out)
        string(accessory.sysfsPath, into: &out)
        literal(#","vendorID":"#, into: &out)
        string(accessory.vendorID, into: &out)
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
        var value = value  // withUTF8 may make a lazy string contiguous: on a copy
        value.withUTF8 { escaped($0, into: &out) }
    }

    /// `bytes` as a JSON string. Room for the worst case (every byte six) is made first, then the bytes are copied in
    /// runs between those that need escaping, found eight at a time: an event line is mostly such strings.
    private static func escaped(_ bytes: UnsafeBufferPointer<UInt8>, into out: inout JSONOutput) {
        guard let base = bytes.baseAddress else {  // empty, without storage
            out.append(quote)
            out.append(quote)
            return
        }
        out.append(maximumCount: 2 + 6 * bytes.count) { start in
            var cursor = start
            cursor.pointee = quote
            cursor += 1
            var runStart = 0
            var index = 0
            while index < bytes.count {
                if index + 8 <= bytes.count, !ByteScan.hasJSONSpecial(ByteScan.word(bytes, at: index)) {
                    index += 8
                    continue
                }
                let byte = bytes[index]
                if byte < 0x20 || byte == quote || byte == backslash {
                    cursor.update(from: base + runStart, count: index - runStart)
                    cursor += index - runStart
                    cursor = escape(byte, at: cursor)
                    runStart = index + 1
                }
                index += 1
            }
            cursor.update(from: base + runStart, count: bytes.count - runStart)
            cursor += bytes.count - runStart
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
            cursor[4] = asciiHexDigit(byte >> 4)
            cursor[5] = asciiHexDigit(byte & 0x0F)
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
