/// Tests on eight bytes at once (one `UInt64` word), for the scans that the hand-written readers and writers make over
/// every byte they handle: newlines when framing, the end of a JSON string, the bytes JSON escapes, the end of a udev
/// message's entry.
///
/// Each test is exact about whether the word holds such a byte; the flags also tell where the first one is (the
/// lowest flagged byte; a byte after it may be flagged too, never one before).
///
/// Public and `@inlinable` behind the SPI `AccmonInternals`, out of the client API: the udev datagram parser
/// (AccmonDevices) calls them once per eight bytes from another module, and a call costs more than the few
/// instructions of a test. This compiler does not inline a `package` function into another module, even an
/// `@inlinable` one.
@_spi(AccmonInternals) public enum ByteScan {
    @usableFromInline static var ones: UInt64 { 0x0101_0101_0101_0101 }
    @usableFromInline static var highBits: UInt64 { 0x8080_8080_8080_8080 }

    /// The eight bytes at `offset` (which must leave eight bytes in `bytes`), the first in the lowest byte.
    @inlinable public static func word(_ bytes: UnsafeBufferPointer<UInt8>, at offset: Int) -> UInt64 {
        word(UnsafeRawBufferPointer(bytes), at: offset)
    }

    /// The eight bytes at `offset` (which must leave eight bytes in `bytes`), the first in the lowest byte.
    @inlinable public static func word(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> UInt64 {
        UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    /// The high bit of each byte of `word` below `limit`, which is at most 0x80 (see the type's note on where).
    @inlinable public static func flags(ofBytesBelow limit: UInt8, in word: UInt64) -> UInt64 {
        // A byte below the limit borrows into its own high bit, which it did not have.
        (word &- ones &* UInt64(limit)) & ~word & highBits
    }

    /// The high bit of each byte of `word` that is `byte` (see the type's note on where).
    @inlinable public static func flags(ofByte byte: UInt8, in word: UInt64) -> UInt64 {
        flags(ofBytesBelow: 1, in: word ^ (ones &* UInt64(byte)))
    }

    /// Whether a byte of `word` is below `limit`, which is at most 0x80.
    @inlinable public static func hasByte(below limit: UInt8, in word: UInt64) -> Bool {
        flags(ofBytesBelow: limit, in: word) != 0
    }

    /// Whether a byte of `word` is `byte`.
    @inlinable public static func hasByte(_ byte: UInt8, in word: UInt64) -> Bool {
        flags(ofByte: byte, in: word) != 0
    }

    /// Whether a byte of `word` is one that ends or escapes a JSON string's run of plain bytes: a control character,
    /// `"` or `\`.
    @inlinable public static func hasJSONSpecial(_ word: UInt64) -> Bool {
        hasByte(below: 0x20, in: word) || hasByte(UInt8(ascii: "\""), in: word) || hasByte(UInt8(ascii: "\\"), in: word)
    }

    /// Whether a byte of `word` is not ASCII.
    @inlinable public static func hasNonASCII(_ word: UInt64) -> Bool { word & highBits != 0 }

    /// The index of the first `byte` in `bytes` at or after `start`.
    @inlinable
    public static func firstIndex(of byte: UInt8, in bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        var position = start
        while position + 8 <= bytes.count, !hasByte(byte, in: word(bytes, at: position)) { position += 8 }
        while position < bytes.count {
            if bytes[position] == byte { return position }
            position += 1
        }
        return nil
    }
}
