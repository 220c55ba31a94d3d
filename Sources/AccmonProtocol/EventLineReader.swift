/// Reads the line of a `connect` or `disconnect` event when it is exactly what ``EventLineWriter`` writes: the inverse
/// of the writer, without JSONDecoder's generic machinery, for the client's hot path.
///
/// It recognises only that canonical form: keys in sorted order, no spaces, numbers without leading zeros, and
/// strings escaped as the writer escapes them (`\"`, `\\`, `\b \t \n \f \r`, `\u00xx` in lowercase for the other
/// control characters, everything else as UTF-8). So a line it reads is byte for byte the writer's line of the event
/// it returns, and ``ProtocolCodec/decodeServerMessage(_:)`` decodes that line to the same event. Anything else (other
/// spacing or key order, other escapes, unknown fields, invalid UTF-8, a malformed line) gives `nil`; callers then
/// decode with ``ProtocolCodec``, which accepts every valid form and reports errors.
package enum EventLineReader {
    /// The event `line` (without its newline) holds, or `nil` when the line is not in the writer's canonical form.
    package static func event(_ line: [UInt8]) -> AccessoryEvent? {
        line.withUnsafeBufferPointer { bytes in
            var cursor = Cursor(bytes: bytes)
            return cursor.event()
        }
    }

    /// The accessory object `bytes` hold, or `nil` when they are not exactly one in the writer's canonical form (the
    /// payload of a retained accessory topic, as the MQTT bridge publishes it).
    package static func accessory(_ bytes: [UInt8]) -> Accessory? {
        bytes.withUnsafeBufferPointer { accessory($0) }
    }

    /// ``accessory(_:)`` on bytes in place.
    package static func accessory(_ bytes: UnsafeBufferPointer<UInt8>) -> Accessory? {
        var cursor = Cursor(bytes: bytes)
        guard let accessory = cursor.accessory(), cursor.position == bytes.count else { return nil }
        return accessory
    }

    private struct Cursor {
        let bytes: UnsafeBufferPointer<UInt8>
        var position = 0

        mutating func event() -> AccessoryEvent? {
            guard skip(#"{"accessory":"#), let accessory = accessory() else { return nil }
            var rejection: String?
            if skip(#","rejected":"#) {
                guard let reason = string() else { return nil }
                rejection = reason
            }
            guard skip(#","seq":"#), let sequence = number(), skip(#","type":"#) else { return nil }
            let change: AccessoryEvent.Change
            if skip(#""connect"}"#) {
                change = .connect
            } else if skip(#""disconnect"}"#) {
                change = .disconnect
            } else {
                return nil
            }
            guard position == bytes.count else { return nil }
            return AccessoryEvent(change, sequence: sequence, accessory: accessory, rejection: rejection)
        }

        /// The accessory object, its fields in the order ``EventLineWriter/accessory(_:into:)`` writes them.
        mutating func accessory() -> Accessory? {
            var accessory = Accessory(kind: .usb, accessoryID: "")
            var separator: StaticString = "{"
            for (field, quotedKey) in Accessory.Field.keyed {
                guard skip(separator), quotedKey.withUnsafeBufferPointer({ skip($0) }) else { return nil }
                separator = ","
                let value: Accessory.FieldValue?
                switch field.shape {
                case .text: value = string().map(Accessory.FieldValue.text)
                case .texts: value = strings().map(Accessory.FieldValue.texts)
                case .number: value = number().map(Accessory.FieldValue.number)
                }
                guard let value, accessory.set(field, to: value) else { return nil }
            }
            return skip("}") ? accessory : nil
        }

        /// Moves past `literal` when the bytes at the cursor are exactly it; returns whether they were.
        mutating func skip(_ literal: StaticString) -> Bool {
            literal.withUTF8Buffer { skip($0) }
        }

        /// Moves past `literal`'s bytes when the bytes at the cursor are exactly them; returns whether they were.
        mutating func skip(_ literal: UnsafeBufferPointer<UInt8>) -> Bool {
            let count = literal.count
            guard bytes.count - position >= count else { return false }
            var offset = 0
            while offset + 8 <= count {  // the keys run to twenty bytes: eight at a time
                guard ByteScan.word(bytes, at: position + offset) == ByteScan.word(literal, at: offset) else {
                    return false
                }
                offset += 8
            }
            while offset < count {
                guard bytes[position + offset] == literal[offset] else { return false }
                offset += 1
            }
            position += count
            return true
        }

        /// A decimal number as `String(UInt64)` writes it: `0`, or digits without a leading zero, that fit.
        mutating func number() -> UInt64? {
            JSONTokenScanner.unsignedInteger(in: bytes, at: &position)
        }

        /// An array of strings, `[` and `]` with the strings separated by commas.
        mutating func strings() -> [String]? {
            guard skip("[") else { return nil }
            var values: [String] = []
            if skip("]") { return values }
            repeat {
                guard let value = string() else { return nil }
                values.append(value)
            } while skip(",")
            return skip("]") ? values : nil
        }

        /// A string escaped as ``EventLineWriter/string(_:into:)`` escapes it, holding valid UTF-8.
        mutating func string() -> String? {
            JSONTokenScanner.string(in: bytes, at: &position, escapes: .eventLineWriter)
        }
    }
}
