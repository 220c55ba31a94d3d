/// A D-Bus value of any type, with its signature (the D-Bus specification, "Type system"). Pure: what
/// ``BusMessageWriter`` appends to a message and ``BusMessageReader`` reads from one.
///
/// Containers carry their element signature, so that an empty array still has its type.
public enum BusValue: Sendable, Hashable {
    /// `y`
    case byte(UInt8)
    /// `b`
    case boolean(Bool)
    /// `n`
    case int16(Int16)
    /// `q`
    case uint16(UInt16)
    /// `i`
    case int32(Int32)
    /// `u`
    case uint32(UInt32)
    /// `x`
    case int64(Int64)
    /// `t`
    case uint64(UInt64)
    /// `d`
    case double(Double)
    /// `s`
    case string(String)
    /// `o`
    case objectPath(String)
    /// `g`
    case signature(String)
    /// `h`: an index into the message's descriptors; written from a descriptor the writer duplicates.
    case unixFD(Int32)
    /// `a` + the element signature.
    indirect case array(element: String, [BusValue])
    /// `{kv}`: only as an array's element.
    indirect case dictEntry(BusValue, BusValue)
    /// `(...)`
    indirect case structure([BusValue])
    /// `v`
    indirect case variant(BusValue)

    /// The value's complete type signature.
    public var signature: String {
        switch self {
        case .byte: "y"
        case .boolean: "b"
        case .int16: "n"
        case .uint16: "q"
        case .int32: "i"
        case .uint32: "u"
        case .int64: "x"
        case .uint64: "t"
        case .double: "d"
        case .string: "s"
        case .objectPath: "o"
        case .signature: "g"
        case .unixFD: "h"
        case .array(let element, _): "a" + element
        case .dictEntry(let key, let value): "{" + key.signature + value.signature + "}"
        case .structure(let fields): "(" + fields.map(\.signature).joined() + ")"
        case .variant: "v"
        }
    }

    /// `a{sv}` from string keys, in the order given.
    public static func vardict(_ entries: [(String, BusValue)]) -> BusValue {
        .array(element: "{sv}", entries.map { .dictEntry(.string($0.0), .variant($0.1)) })
    }

    /// `as`
    public static func strings(_ values: [String]) -> BusValue { .array(element: "s", values.map { .string($0) }) }

    /// The string of `s`, `o` or `g`; `nil` for other types.
    public var text: String? {
        switch self {
        case .string(let text), .objectPath(let text), .signature(let text): text
        default: nil
        }
    }

    /// The entries of an `a{s...}` dictionary, variants unwrapped, in order; `nil` when this is not one.
    public var stringKeyedEntries: [(key: String, value: BusValue)]? {
        guard case .array(let element, let items) = self, element.hasPrefix("{s") else { return nil }
        var entries: [(key: String, value: BusValue)] = []
        for item in items {
            guard case .dictEntry(.string(let key), let value) = item else { return nil }
            if case .variant(let inner) = value { entries.append((key, inner)) } else { entries.append((key, value)) }
        }
        return entries
    }
}

/// Checks of D-Bus names and signatures (the specification's "Valid names" and "Type system").
public enum BusNames {
    /// Whether `path` is a valid object path: `/`, or `/`-separated non-empty elements of `[A-Za-z0-9_]`.
    public static func isObjectPath(_ path: String) -> Bool {
        let bytes = Array(path.utf8)
        guard bytes.first == UInt8(ascii: "/") else { return false }
        if bytes.count == 1 { return true }
        guard bytes.last != UInt8(ascii: "/") else { return false }
        var previousWasSlash = true
        for byte in bytes.dropFirst() {
            if byte == UInt8(ascii: "/") {
                if previousWasSlash { return false }
                previousWasSlash = true
            } else {
                guard isElementByte(byte) else { return false }
                previousWasSlash = false
            }
        }
        return true
    }

    private static func isElementByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
            || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_")
    }

    /// The complete types a signature is made of, such as `["s", "a{sv}"]` for `sa{sv}`; `nil` when it is not a
    /// valid signature.
    public static func completeTypes(of signature: String) -> [String]? {
        let bytes = Array(signature.utf8)
        var index = 0
        var types: [String] = []
        while index < bytes.count {
            let start = index
            guard skipCompleteType(bytes, &index, depth: 0) else { return nil }
            types.append(String(decoding: bytes[start..<index], as: UTF8.self))
        }
        return types
    }

    private static func skipCompleteType(_ bytes: [UInt8], _ index: inout Int, depth: Int) -> Bool {
        guard index < bytes.count, depth < 64 else { return false }
        let byte = bytes[index]
        index += 1
        switch byte {
        case UInt8(ascii: "y"), UInt8(ascii: "b"), UInt8(ascii: "n"), UInt8(ascii: "q"), UInt8(ascii: "i"),
            UInt8(ascii: "u"), UInt8(ascii: "x"), UInt8(ascii: "t"), UInt8(ascii: "d"), UInt8(ascii: "s"),
            UInt8(ascii: "o"), UInt8(ascii: "g"), UInt8(ascii: "h"), UInt8(ascii: "v"):
            return true
        case UInt8(ascii: "a"):
            if index < bytes.count, bytes[index] == UInt8(ascii: "{") {
                index += 1
                // A dict entry: a basic key type, then one complete type, then `}`.
                guard index < bytes.count, "ynqiuxtdsogbh".utf8.contains(bytes[index]) else { return false }
                index += 1
                guard skipCompleteType(bytes, &index, depth: depth + 1) else { return false }
                guard index < bytes.count, bytes[index] == UInt8(ascii: "}") else { return false }
                index += 1
                return true
            }
            return skipCompleteType(bytes, &index, depth: depth + 1)
        case UInt8(ascii: "("):
            var fields = 0
            while index < bytes.count, bytes[index] != UInt8(ascii: ")") {
                guard skipCompleteType(bytes, &index, depth: depth + 1) else { return false }
                fields += 1
            }
            guard index < bytes.count, fields > 0 else { return false }
            index += 1
            return true
        default:
            return false
        }
    }
}
