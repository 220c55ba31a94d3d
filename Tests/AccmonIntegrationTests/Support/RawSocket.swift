import AccmonSys
import AccmonTestSupport
import Foundation
import Glibc

/// A bare Unix-socket client for protocol tests: sends raw bytes, reads lines with a timeout.
///
/// Reads poll the descriptor without blocking and sleep between polls, so no thread of the cooperative pool is held.
final class RawSocket: @unchecked Sendable {
    private let descriptor: FileDescriptor
    private var buffer: [UInt8] = []
    private var closed = false
    /// Whether the daemon closed the connection (a read returned 0 or ECONNRESET).
    private(set) var sawEndOfFile = false
    /// Bytes received in total.
    private(set) var receivedByteCount = 0

    init(path: String) throws {
        descriptor = try UnixSocket.connect(path: path)
    }

    /// Sends `text` (add the newline yourself), blocking until the kernel takes it all.
    func send(_ text: String) throws {
        try descriptor.sendAll(Array(text.utf8))
    }

    /// Sends raw bytes.
    func send(bytes: [UInt8]) throws {
        try descriptor.sendAll(bytes)
    }

    /// Reads what is available now without blocking; returns false at end of file.
    private func pump() -> Bool {
        var poll = pollfd(fd: descriptor.rawValue, events: Int16(POLLIN), revents: 0)
        while Glibc.poll(&poll, 1, 0) > 0 {
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let count = chunk.withUnsafeMutableBytes { Glibc.recv(descriptor.rawValue, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                buffer.append(contentsOf: chunk[0..<count])
                receivedByteCount += count
            } else if count == 0 || errno == ECONNRESET {
                sawEndOfFile = true
                return false
            } else if errno != EINTR && errno != EAGAIN {
                sawEndOfFile = true
                return false
            }
            poll.revents = 0
        }
        return true
    }

    /// The next line (without its newline), or `nil` at end of file or after `timeout`.
    func readLine(timeout: Duration = .seconds(5)) async -> String? {
        var line: String?
        _ = await eventually(timeout: timeout, interval: .milliseconds(1)) {
            let open = pump()
            if let newline = buffer.firstIndex(of: 0x0A) {
                line = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                return true
            }
            return !open
        }
        return line
    }

    /// The next line decoded as a JSON object, or `nil`.
    func readObject(timeout: Duration = .seconds(5)) async -> [String: Any]? {
        guard let line = await readLine(timeout: timeout) else { return nil }
        return jsonObject(line)
    }

    /// Reads until the daemon closes the connection or `timeout` passes; returns the complete lines read and
    /// whether end of file was reached. A trailing partial line is returned in `partial`.
    func readToEnd(timeout: Duration) async -> (lines: [String], partial: [UInt8], endOfFile: Bool) {
        let reachedEnd = await eventually(timeout: timeout, interval: .milliseconds(1)) { !pump() }
        var lines: [String] = []
        while let newline = buffer.firstIndex(of: 0x0A) {
            lines.append(String(decoding: buffer[..<newline], as: UTF8.self))
            buffer.removeSubrange(...newline)
        }
        return (lines, buffer, reachedEnd)
    }

    /// Reads everything available now without blocking and returns the complete lines buffered so far.
    func takeAvailableLines() -> [String] {
        _ = pump()
        var lines: [String] = []
        while let newline = buffer.firstIndex(of: 0x0A) {
            lines.append(String(decoding: buffer[..<newline], as: UTF8.self))
            buffer.removeSubrange(...newline)
        }
        return lines
    }

    /// Whether a byte is waiting to be read within `timeout` (without consuming complete lines).
    func hasPendingData(within timeout: Duration) async -> Bool {
        await eventually(timeout: timeout, interval: .milliseconds(1)) {
            _ = pump()
            return !buffer.isEmpty || sawEndOfFile
        }
    }

    /// Blocks the calling thread in `poll` until the socket is readable or `milliseconds` pass: for a test that must
    /// look at other sockets the moment this one gets data (the async reads look every millisecond).
    func blockUntilReadable(milliseconds: Int32) -> Bool {
        var poll = pollfd(fd: descriptor.rawValue, events: Int16(POLLIN), revents: 0)
        return Glibc.poll(&poll, 1, milliseconds) > 0
    }

    /// Sets `SO_RCVBUF`.
    func setReceiveBufferSize(_ bytes: Int32) {
        var value = bytes
        _ = setsockopt(descriptor.rawValue, SOL_SOCKET, SO_RCVBUF, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    /// Hangs up: shuts the connection down, then closes the descriptor. The shutdown makes the hang-up certain at
    /// once: a child spawned by another test in this process holds a copy of the descriptor until its `exec`, and
    /// while it does, a bare `close` leaves the connection open.
    func close() {
        guard !closed else { return }
        closed = true
        _ = shutdown(descriptor.rawValue, Int32(SHUT_RDWR))
        descriptor.close()
    }

    deinit { close() }
}

/// Parses one JSON object line; `nil` if it is not one.
func jsonObject(_ line: String) -> [String: Any]? {
    (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]  // try?: nil means "not an object"
}
