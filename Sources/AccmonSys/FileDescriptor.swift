import CAccmonShims
import Glibc

/// A file descriptor with the system calls accmon needs. A value: closing is explicit (``close()``).
public struct FileDescriptor: RawRepresentable, Sendable, Hashable {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// Receives from a socket into `buffer` (`recv(2)`); returns 0 when the peer closed its side.
    /// - Throws: ``Errno/wouldBlock`` on a non-blocking socket with nothing to read.
    public func receive(into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        try valueOrErrno { Glibc.recv(rawValue, buffer.baseAddress, buffer.count, 0) }
    }

    /// Whether a socket's peer has closed it (a hang-up, not a half-close: `poll` says `POLLHUP`) and nothing is
    /// left to read (`recv` with `MSG_PEEK | MSG_DONTWAIT` finds the end of the stream): a hang-up the caller has
    /// not read yet. A peer that closed with bytes of ours unread is reported by the kernel as `ECONNRESET` (which
    /// this peek then clears; the next read finds the end of the stream): a hang-up too.
    public var peerHasClosed: Bool {
        var waiting = pollfd(fd: rawValue, events: Int16(POLLIN), revents: 0)
        guard Glibc.poll(&waiting, 1, 0) == 1, Int32(waiting.revents) & POLLHUP != 0 else { return false }
        var byte: UInt8 = 0
        let peeked = Glibc.recv(rawValue, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return peeked == 0 || (peeked < 0 && errno == ECONNRESET)
    }

    /// Writes from `buffer`; returns the number of bytes written. Uses `send(MSG_NOSIGNAL)` on sockets.
    public func write(_ buffer: UnsafeRawBufferPointer) throws(Errno) -> Int {
        try valueOrErrno { Glibc.send(rawValue, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Reads into `buffer` from `offset` of the file (`pread(2)`); returns the number of bytes read, 0 at its end.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(Errno) -> Int {
        try valueOrErrno { Glibc.pread(rawValue, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// Writes all of `bytes`, blocking as needed. For blocking descriptors (client side, standard streams).
    public func writeAll(_ bytes: some Collection<UInt8>) throws(Errno) {
        let array = Array(bytes)
        var offset = 0
        while offset < array.count {
            let written = array.withUnsafeBytes { raw in
                let rest = UnsafeRawBufferPointer(rebasing: raw[offset...])
                return Glibc.write(rawValue, rest.baseAddress, rest.count)
            }
            if written < 0 {
                if errno == EINTR { continue }
                throw Errno.current
            }
            offset += written
        }
    }

    /// Cuts the file to `length` bytes (`ftruncate(2)`).
    public func truncate(to length: Int) throws(Errno) {
        _ = try valueOrErrno { Glibc.ftruncate(rawValue, off_t(length)) }
    }

    /// Sends `bytes` on a Unix socket with `descriptor` attached to the first of them (`SCM_RIGHTS`: the peer gets its
    /// own descriptor of the same open file), the rest as ``sendAll(_:)`` does.
    public func sendAll(_ bytes: [UInt8], passing descriptor: FileDescriptor) throws(Errno) {
        var sent = -1
        while sent < 0 {
            sent = bytes.withUnsafeBytes { raw in
                CAccmonShims_sendWithDescriptor(rawValue, raw.baseAddress, raw.count, descriptor.rawValue)
            }
            if sent < 0 && errno != EINTR { throw Errno.current }
        }
        if sent < bytes.count { try sendAll(Array(bytes[sent...])) }
    }

    /// Reads what a Unix socket has into `buffer` (`recvmsg`), and the descriptor the message carried, if any (one:
    /// any more are closed); 0 bytes at the end of the stream.
    public func receive(into buffer: UnsafeMutableRawBufferPointer, descriptor: inout FileDescriptor?) throws(Errno)
        -> Int
    {
        var passed: Int32 = -1
        let received = try valueOrErrno {
            CAccmonShims_receiveWithDescriptor(rawValue, buffer.baseAddress, buffer.count, &passed)
        }
        if passed >= 0 {
            descriptor?.close()
            descriptor = FileDescriptor(rawValue: passed)
        }
        return received
    }

    /// Sends all of `bytes` on a blocking socket, without raising `SIGPIPE` when the peer is gone.
    public func sendAll(_ bytes: [UInt8]) throws(Errno) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { raw in
                let rest = UnsafeRawBufferPointer(rebasing: raw[offset...])
                return Glibc.send(rawValue, rest.baseAddress, rest.count, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 {
                if errno == EINTR { continue }
                throw Errno.current
            }
            offset += sent
        }
    }

    /// Closes the descriptor. Never retried on `EINTR` (Linux has closed it anyway).
    public func close() {
        _ = Glibc.close(rawValue)
    }

    /// Sets or clears `O_NONBLOCK`.
    public func setNonBlocking(_ on: Bool = true) throws(Errno) {
        let flags = try valueOrErrno { fcntl(rawValue, F_GETFL) }
        _ = try valueOrErrno { fcntl(rawValue, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK) }
    }

    /// Standard error.
    public static let standardError = FileDescriptor(rawValue: 2)
    /// Standard output.
    public static let standardOutput = FileDescriptor(rawValue: 1)
}
