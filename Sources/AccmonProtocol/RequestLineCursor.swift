// The cursor RequestLineReader reads a request line with: strict JSON, one pass, keys kept to find duplicates.

/// The bytes of a JSON string of printable ASCII without escapes, in the line: an object's key, or a value from a fixed
/// set (a request's type or action, an accessory's kind), which needs no `String`. It matches a string literal in a
/// `case`.
struct PlainString: Equatable {
    let bytes: UnsafeBufferPointer<UInt8>

    static var empty: PlainString { PlainString(bytes: UnsafeBufferPointer(start: nil, count: 0)) }

    static func ~= (name: StaticString, key: PlainString) -> Bool {
        name.utf8CodeUnitCount == key.bytes.count
            && memoryEquals(name.utf8Start, key.bytes.baseAddress, key.bytes.count)
    }

    /// Whether the bytes are `text`'s UTF-8.
    func equals(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 {
            $0.count == bytes.count && Self.memoryEquals($0.baseAddress, bytes.baseAddress, $0.count)
        }
    }

    static func == (lhs: PlainString, rhs: PlainString) -> Bool {
        lhs.bytes.count == rhs.bytes.count
            && memoryEquals(lhs.bytes.baseAddress, rhs.bytes.baseAddress, lhs.bytes.count)
    }

    private static func memoryEquals(_ lhs: UnsafePointer<UInt8>?, _ rhs: UnsafePointer<UInt8>?, _ count: Int) -> Bool {
        for offset in 0..<count where lhs![offset] != rhs![offset] { return false }
        return true
    }
}

struct RequestCursor {
    let bytes: UnsafeBufferPointer<UInt8>
    var position = 0
    /// How many objects and arrays enclose the position.
    var depth = 0
    /// The keys read so far in each object that encloses the position, the outermost object's first: the first
    /// `openKeys` of this room (the rest is uninitialized).
    let keys: UnsafeMutableBufferPointer<PlainString>
    var openKeys = 0

    init(bytes: UnsafeBufferPointer<UInt8>, keys: UnsafeMutableBufferPointer<PlainString>) {
        self.bytes = bytes
        self.keys = keys
    }

    // MARK: Members

    /// Reads a member's value into `field` with `value`; fails on a value `value` does not read.
    mutating func read<Value>(_ field: inout Value?, _ value: (inout Self) -> Value?) -> Bool {
        field = value(&self)
        return field != nil
    }

    /// Reads a member's value into `field` with `value`, or `null` as absent; fails on a value `value` does not read.
    mutating func readNullable<Value>(_ field: inout Value?, _ value: (inout Self) -> Value?) -> Bool {
        if literal("null") { return true }
        return read(&field, value)
    }

    /// Reads an object, handing each member's key to `member`, which must read the value; fails on a duplicate key,
    /// a key with an escape or a non-ASCII character, too deep a nesting, a syntax error, or when `member` fails.
    mutating func forEachMember(_ member: (inout Self, PlainString) -> Bool) -> Bool {
        guard enter(UInt8(ascii: "{")) else { return false }
        if skip(UInt8(ascii: "}")) { return leave() }
        let firstKey = openKeys
        repeat {
            guard let key = plainString(), openKeys < keys.count else { return false }
            for index in firstKey..<openKeys where keys[index] == key { return false }
            (keys.baseAddress! + openKeys).initialize(to: key)
            openKeys += 1
            guard skip(UInt8(ascii: ":")), member(&self, key) else { return false }
        } while skip(UInt8(ascii: ","))
        openKeys = firstKey
        return skip(UInt8(ascii: "}")) && leave()
    }

    /// Reads an array, calling `element` to read each element.
    mutating func forEachElement(_ element: (inout Self) -> Bool) -> Bool {
        guard enter(UInt8(ascii: "[")) else { return false }
        if skip(UInt8(ascii: "]")) { return leave() }
        repeat {
            guard element(&self) else { return false }
        } while skip(UInt8(ascii: ","))
        return skip(UInt8(ascii: "]")) && leave()
    }

    private mutating func enter(_ opening: UInt8) -> Bool {
        guard depth < RequestLineReader.maximumDepth, skip(opening) else { return false }
        depth += 1
        return true
    }

    private mutating func leave() -> Bool {
        depth -= 1
        return true
    }

    /// A string of ASCII characters other than controls, without escapes: a key, or a value from a fixed set.
    mutating func plainString() -> PlainString? {
        guard skip(UInt8(ascii: "\"")) else { return nil }
        let start = position
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\"") {
                position += 1
                return PlainString(bytes: UnsafeBufferPointer(rebasing: bytes[start..<position - 1]))
            }
            guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\\") else { return nil }
            position += 1
        }
        return nil
    }

    /// Skips a value of any type, checking its syntax.
    mutating func skipValue() -> Bool {
        switch peek() {
        case UInt8(ascii: "{"): return forEachMember { cursor, _ in cursor.skipValue() }
        case UInt8(ascii: "["): return forEachElement { cursor in cursor.skipValue() }
        case UInt8(ascii: "\""): return string() != nil
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return boolean() != nil
        case UInt8(ascii: "n"): return literal("null")
        default: return skipNumber()
        }
    }

    // MARK: Scalars

    /// `true` or `false`.
    mutating func boolean() -> Bool? {
        if literal("true") { return true }
        if literal("false") { return false }
        return nil
    }

    /// An integer that fits in an `Int64`.
    mutating func signedInteger() -> Int64? {
        guard let (isNegative, magnitude) = plainInteger() else { return nil }
        if isNegative { return magnitude <= Int64.min.magnitude ? Int64(truncatingIfNeeded: 0 &- magnitude) : nil }
        return Int64(exactly: magnitude)
    }

    /// An integer from 0 to `UInt64.max`.
    mutating func unsignedInteger() -> UInt64? {
        guard let (isNegative, magnitude) = plainInteger(), !isNegative else { return nil }
        return magnitude
    }

    /// A number written as a plain integer, `0` or digits without a leading zero after an optional `-`, whose
    /// magnitude fits in a `UInt64`; not `-0`. A fraction or an exponent after it is left unread, where the caller
    /// expects a separator: a syntax error.
    private mutating func plainInteger() -> (isNegative: Bool, magnitude: UInt64)? {
        skipWhitespace()
        let isNegative = position < bytes.count && bytes[position] == UInt8(ascii: "-")
        if isNegative { position += 1 }
        guard let magnitude = JSONTokenScanner.unsignedInteger(in: bytes, at: &position),
            !(isNegative && magnitude == 0)
        else { return nil }
        return (isNegative, magnitude)
    }

    /// Skips a number of any form JSON allows: `-`, an integer part without a leading zero, a fraction, an exponent.
    private mutating func skipNumber() -> Bool {
        skipWhitespace()
        _ = skip(byte: UInt8(ascii: "-"))
        // A leading zero is the whole integer part; the digits after it are then a syntax error the caller finds.
        guard skip(byte: UInt8(ascii: "0")) || skipDigits() else { return false }
        if skip(byte: UInt8(ascii: ".")) { guard skipDigits() else { return false } }
        if skip(byte: UInt8(ascii: "e")) || skip(byte: UInt8(ascii: "E")) {
            if !skip(byte: UInt8(ascii: "+")) { _ = skip(byte: UInt8(ascii: "-")) }
            guard skipDigits() else { return false }
        }
        return true
    }

    /// Skips one or more digits.
    private mutating func skipDigits() -> Bool {
        let start = position
        while position < bytes.count, bytes[position] &- UInt8(ascii: "0") < 10 { position += 1 }
        return position > start
    }

    /// A string, unescaped, holding valid UTF-8.
    mutating func string() -> String? {
        skipWhitespace()
        return JSONTokenScanner.string(in: bytes, at: &position, escapes: .json)
    }

    // MARK: Bytes

    /// Moves past JSON whitespace: spaces, tabs, line feeds and carriage returns.
    mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    /// The next byte after whitespace, not consumed.
    mutating func peek() -> UInt8? {
        skipWhitespace()
        return position < bytes.count ? bytes[position] : nil
    }

    /// Moves past whitespace and `token` when `token` is next; returns whether it was.
    private mutating func skip(_ token: UInt8) -> Bool {
        skipWhitespace()
        return skip(byte: token)
    }

    /// Moves past `byte` when it is the very next byte; returns whether it was.
    private mutating func skip(byte: UInt8) -> Bool {
        guard position < bytes.count, bytes[position] == byte else { return false }
        position += 1
        return true
    }

    /// Moves past whitespace and `word` when `word` is next; returns whether it was.
    mutating func literal(_ word: StaticString) -> Bool {
        skipWhitespace()
        let count = word.utf8CodeUnitCount
        guard bytes.count - position >= count else { return false }
        for offset in 0..<count where bytes[position + offset] != word.utf8Start[offset] { return false }
        position += count
        return true
    }
}
