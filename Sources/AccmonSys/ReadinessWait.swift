import Glibc

/// What ``waitForReadable(_:timeoutMilliseconds:)`` found.
public struct ReadableSet: Sendable, Hashable {
    /// One flag per descriptor given, in order: readable, hung up or in error.
    public var ready: [Bool]
}

/// Waits with `poll(2)` until one of `descriptors` is readable (or hung up), or `timeoutMilliseconds` pass (-1: no
/// limit; 0: just look). Retries on `EINTR`.
public func waitForReadable(_ descriptors: [FileDescriptor], timeoutMilliseconds: Int32) throws(Errno) -> ReadableSet {
    var waits = descriptors.map { pollfd(fd: $0.rawValue, events: Int16(POLLIN), revents: 0) }
    while true {
        let result = waits.withUnsafeMutableBufferPointer { buffer in
            poll(buffer.baseAddress, nfds_t(buffer.count), timeoutMilliseconds)
        }
        if result >= 0 { return ReadableSet(ready: waits.map { $0.revents != 0 }) }
        let error = Errno.current
        if error != .interrupted { throw error }
    }
}
