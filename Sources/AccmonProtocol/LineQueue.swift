/// Lines received and not yet handled, first in first out, with their bytes in one buffer: a client that pipelines
/// thousands of short requests costs the daemon their bytes and an offset each, not an array each (a 17-byte
/// `status` line held as its own array takes a 64-byte allocation and an 8-byte slot).
public struct LineQueue: Sendable, Sequence {
    /// The lines' bytes, those of lines already taken included until the queue empties.
    private var bytes: [UInt8] = []
    /// Where each line ends in ``bytes``; an over-long line (its bytes dropped) has the sign bit set.
    private var ends: [Int32] = []
    /// The first line not taken yet, and where its bytes start.
    private var head = 0
    private var headStart = 0

    public init() {}

    /// Lines not taken yet.
    public var count: Int { ends.count - head }
    public var isEmpty: Bool { head == ends.count }
    /// Bytes held, taken lines included until the queue empties.
    public var byteCount: Int { bytes.count }

    mutating func appendLine(_ line: UnsafeBufferPointer<UInt8>) {
        bytes.append(contentsOf: line)
        ends.append(Int32(bytes.count))
    }

    mutating func appendOverlong() { ends.append(Int32(bytes.count) | Int32.min) }

    /// Takes the first `count` lines away. An emptied queue gives its memory back.
    public mutating func removeFirst(_ count: Int) {
        precondition(count >= 0 && count <= self.count, "LineQueue.removeFirst: \(count) of \(self.count)")
        guard count > 0 else { return }
        head += count
        headStart = Int(ends[head - 1] & Int32.max)
        if head == ends.count {
            bytes = []
            ends = []
            head = 0
            headStart = 0
        }
    }

    public func makeIterator() -> Iterator { Iterator(queue: self, index: head, start: headStart) }

    /// The lines not taken yet, first first; each line's bytes are copied out as it is reached.
    public struct Iterator: IteratorProtocol {
        let queue: LineQueue
        var index: Int
        var start: Int

        public mutating func next() -> LineFramer.Item? {
            guard index < queue.ends.count else { return nil }
            let end = queue.ends[index]
            index += 1
            if end < 0 {
                start = Int(end & Int32.max)
                return .overlong
            }
            defer { start = Int(end) }
            return .line(Array(queue.bytes[start..<Int(end)]))
        }
    }
}

extension LineQueue: LineSink {}
