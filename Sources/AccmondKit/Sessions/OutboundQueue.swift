import AccmonSys

/// The bytes waiting to be written to one client, bounded in size.
///
/// Holds references to encoded lines, so one event's bytes are shared by every queue they sit in.
struct OutboundQueue {
    private var chunks: [[UInt8]] = []
    private var head = 0
    private var headOffset = 0
    /// Bytes waiting.
    private(set) var byteCount = 0
    /// The most bytes the queue may hold.
    let limit: Int

    init(limit: Int) { self.limit = limit }

    var isEmpty: Bool { byteCount == 0 }

    /// Whether `line` fits under the limit (an empty queue takes any line, so no line can be stuck).
    func fits(_ line: [UInt8]) -> Bool {
        byteCount == 0 || byteCount + line.count <= limit
    }

    /// Appends `line`. Callers check ``fits(_:)`` for events; replies are appended regardless, and the broker stops
    /// handling requests while the queue is over its limit, which bounds them.
    mutating func append(_ line: [UInt8]) {
        chunks.append(line)
        byteCount += line.count
    }

    /// Writes as much as the socket takes, several lines per system call.
    /// - Returns: true when everything was written.
    /// - Throws: the socket's error other than would-block (the peer is gone).
    mutating func flush(to fd: FileDescriptor) throws(Errno) -> Bool {
        while byteCount > 0 {
            guard let sent = try fd.sendGathering(chunks, from: head, offset: headOffset, maximumChunks: 64) else {
                return false
            }
            consume(sent)
        }
        return true
    }

    /// Drops the oldest `count` bytes unwritten: a bus subscription's events, once acknowledged.
    mutating func discard(_ count: Int) { consume(min(count, byteCount)) }

    private mutating func consume(_ count: Int) {
        var remaining = count
        byteCount -= count
        while remaining > 0 {
            let available = chunks[head].count - headOffset
            if remaining >= available {
                remaining -= available
                head += 1
                headOffset = 0
            } else {
                headOffset += remaining
                remaining = 0
            }
        }
        if head == chunks.count {
            chunks.removeAll(keepingCapacity: true)
            head = 0
        } else if head > 1024 {
            chunks.removeFirst(head)
            head = 0
        }
    }
}
