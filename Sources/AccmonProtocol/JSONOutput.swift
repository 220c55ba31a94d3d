/// The bytes a hand-written JSON writer produces (``EventLineWriter``, ``ReplyLineWriter``, the daemon's state file):
/// raw memory written with `memcpy`, grown by doubling, handed out once as an array by ``bytes()``.
///
/// Appending to an `[UInt8]` goes through the generic `append(contentsOf:)` at every key and string, which was
/// about a third of an event line's encoding.
package struct JSONOutput: ~Copyable {
    private var base: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    /// Whether `base` was allocated here (and is freed here), not lent by ``bytes(startingOnTheStack:_:)``.
    private var ownsStorage = true
    /// The number of bytes written.
    package private(set) var count = 0

    /// An empty output with room for `capacity` bytes before it grows.
    package init(capacity: Int) {
        self.capacity = max(capacity, 16)
        base = .allocate(capacity: self.capacity)
    }

    private init(lending storage: UnsafeMutableBufferPointer<UInt8>) {
        base = storage.baseAddress!
        capacity = storage.count
        ownsStorage = false
    }

    /// The bytes `write` writes, written first into `capacity` bytes on the stack and moved to the heap only if they
    /// outgrow them: a line that fits costs one allocation, its array's.
    package static func bytes(startingOnTheStack capacity: Int, _ write: (inout JSONOutput) -> Void) -> [UInt8] {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(capacity, 16)) { storage in
            var out = JSONOutput(lending: storage)
            write(&out)
            return out.bytes()
        }
    }

    deinit { if ownsStorage { base.deallocate() } }

    /// The bytes written.
    package consuming func bytes() -> [UInt8] {
        [UInt8](UnsafeBufferPointer(start: base, count: count))
    }

    /// Appends one byte.
    package mutating func append(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    /// Appends `bytes`.
    package mutating func append(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let source = bytes.baseAddress else { return }
        reserve(bytes.count)
        (base + count).update(from: source, count: bytes.count)
        count += bytes.count
    }

    /// Appends the UTF-8 of `text`, as it is (not as a JSON string: see ``EventLineWriter/string(_:into:)``).
    package mutating func append(utf8 text: String) {
        var text = text  // withUTF8 may make a lazy string contiguous: on a copy
        text.withUTF8 { append($0) }
    }

    /// Makes room for `maximumCount` bytes and lets `write` write them from the pointer it is given; `write` returns
    /// how many it wrote.
    package mutating func append(maximumCount: Int, _ write: (UnsafeMutablePointer<UInt8>) -> Int) {
        reserve(maximumCount)
        count += write(base + count)
    }

    /// Makes room for `extra` more bytes.
    private mutating func reserve(_ extra: Int) {
        guard count + extra > capacity else { return }
        let newCapacity = max(count + extra, 2 * capacity)
        let newBase = UnsafeMutablePointer<UInt8>.allocate(capacity: newCapacity)
        newBase.initialize(from: base, count: count)
        if ownsStorage { base.deallocate() }
        base = newBase
        capacity = newCapacity
        ownsStorage = true
    }
}
