import AccmonSys
import Glibc

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
            let batch = min(chunks.count - head, 64)
            // The iovecs, on the stack, point into `chunks`, which is not mutated until sendmsg returns.
            let written = withUnsafeTemporaryAllocation(of: iovec.self, capacity: batch) { vectors in
                chunks.withUnsafeBufferPointer { all in
                    for slot in 0..<batch {
                        let index = head + slot
                        let start = index == head ? headOffset : 0
                        all[index].withUnsafeBytes { raw in
                            vectors[slot] = iovec(
                                iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress.map { $0 + start }),
                                iov_len: raw.count - start)
                        }
                    }
                    var header = msghdr()
                    header.msg_iov = vectors.baseAddress
                    header.msg_iovlen = batch
                    return sendmsg(fd.rawValue, &header, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
                }
            }
            if written < 0 {
                let error = Errno.current
                if error == .interrupted { continue }
                if error == .wouldBlock { return false }
                throw error
            }
            consume(written)
        }
        return true
    }

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
