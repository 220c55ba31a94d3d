import Glibc

extension FileDescriptor {
    /// Sends up to `maximumChunks` of `chunks`, from `chunks[first]` skipping its first `offset` bytes, with one
    /// `sendmsg` (never raising SIGPIPE, never blocking).
    ///
    /// - Returns: the bytes sent, or `nil` when the socket takes nothing now (`EAGAIN`). Retries on `EINTR`.
    /// - Throws: the socket's other errors (the peer is gone).
    public func sendGathering(
        _ chunks: [[UInt8]], from first: Int, offset: Int, maximumChunks: Int
    ) throws(Errno) -> Int? {
        let batch = min(chunks.count - first, maximumChunks)
        guard batch > 0 else { return 0 }
        while true {
            // The iovecs, on the stack, point into `chunks`, which cannot change until sendmsg returns.
            let sent = withUnsafeTemporaryAllocation(of: iovec.self, capacity: batch) { vectors in
                chunks.withUnsafeBufferPointer { all in
                    for slot in 0..<batch {
                        let start = slot == 0 ? offset : 0
                        all[first + slot].withUnsafeBytes { raw in
                            vectors[slot] = iovec(
                                iov_base: UnsafeMutableRawPointer(mutating: raw.baseAddress.map { $0 + start }),
                                iov_len: raw.count - start)
                        }
                    }
                    var header = msghdr()
                    header.msg_iov = vectors.baseAddress
                    header.msg_iovlen = batch
                    return sendmsg(rawValue, &header, Int32(MSG_NOSIGNAL) | Int32(MSG_DONTWAIT))
                }
            }
            if sent >= 0 { return sent }
            let error = Errno.current
            if error == .interrupted { continue }
            if error == .wouldBlock { return nil }
            throw error
        }
    }
}
