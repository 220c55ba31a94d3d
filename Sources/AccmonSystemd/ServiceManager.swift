public import AccmonSys
import CSystemd
import Glibc

/// What a daemon asks of the service manager (systemd), through libsystemd: readiness and status notification
/// (sd_notify(3)), socket activation (sd_listen_fds(3)) and the watchdog (sd_watchdog_enabled(3)).
///
/// Every call is harmless outside systemd: without `NOTIFY_SOCKET`, `LISTEN_FDS` or `WATCHDOG_USEC` in the
/// environment they do nothing and say so.
public enum ServiceManager {
    /// The first descriptor socket activation passes (`SD_LISTEN_FDS_START`).
    public static let firstPassedDescriptor = FileDescriptor(rawValue: 3)

    /// Sends `state` to the service manager: newline-separated assignments such as `READY=1`, `STATUS=…`,
    /// `WATCHDOG=1` or `STOPPING=1`.
    ///
    /// - Returns: whether it was sent; `false` when `NOTIFY_SOCKET` is not set.
    /// - Throws: ``Errno`` when sending failed (sd_notify(3) returned a negative errno).
    @discardableResult
    public static func notify(_ state: String) throws(Errno) -> Bool {
        let result = sd_notify(0, state)
        if result < 0 { throw Errno(rawValue: -result) }
        return result > 0
    }

    /// Takes the descriptors socket activation passed (fd 3 and up), and unsets `LISTEN_FDS`, `LISTEN_PID` and
    /// `LISTEN_FDNAMES` so that no child inherits them.
    ///
    /// - Important: changes the environment: call it once, at start-up, before any other thread exists.
    /// - Returns: the descriptors, close-on-exec; empty when the process was not socket-activated.
    /// - Throws: ``Errno`` when the variables are malformed (sd_listen_fds(3) returned a negative errno).
    public static func takePassedDescriptors() throws(Errno) -> [FileDescriptor] {
        let count = sd_listen_fds(1)
        if count < 0 { throw Errno(rawValue: -count) }
        return (0..<count).map { offset in
            let descriptor = FileDescriptor(rawValue: firstPassedDescriptor.rawValue + offset)
            _ = fcntl(descriptor.rawValue, F_SETFD, FD_CLOEXEC)
            return descriptor
        }
    }

    /// Whether `descriptor` is a listening `AF_UNIX` stream socket (sd_is_socket_unix(3)).
    public static func isListeningUnixStreamSocket(_ descriptor: FileDescriptor) throws(Errno) -> Bool {
        let result = sd_is_socket_unix(descriptor.rawValue, Int32(SOCK_STREAM.rawValue), 1, nil, 0)
        if result < 0 { throw Errno(rawValue: -result) }
        return result > 0
    }

    /// The path `descriptor`, a Unix socket, is bound to (getsockname(2)); `nil` for an unnamed or abstract socket.
    public static func boundPath(of descriptor: FileDescriptor) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor.rawValue, $0, &length) }
        }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        guard result == 0, Int(length) > pathOffset else { return nil }
        return withUnsafeBytes(of: &address.sun_path) { raw -> String? in
            let bytes = raw.prefix(Int(length) - pathOffset)
            guard let first = bytes.first, first != 0 else { return nil }  // abstract (leading NUL) or unnamed
            return String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
    }

    /// How often the service manager expects `WATCHDOG=1`, from `WATCHDOG_USEC` (sd_watchdog_enabled(3));
    /// `nil` when the watchdog is off for this process.
    ///
    /// - Throws: ``Errno`` when the variables are malformed.
    public static func watchdogIntervalMicroseconds() throws(Errno) -> UInt64? {
        var microseconds: UInt64 = 0
        let result = sd_watchdog_enabled(0, &microseconds)
        if result < 0 { throw Errno(rawValue: -result) }
        return result > 0 && microseconds > 0 ? microseconds : nil
    }
}

/// The systemd journal's native protocol, through sd_journal_sendv(3).
public enum Journal {
    /// Whether standard error is connected to the journal: systemd sets `JOURNAL_STREAM` to the device and inode
    /// numbers of that stream (systemd.exec(5)); a redirected stderr no longer matches them.
    public static var standardErrorIsJournal: Bool {
        guard let value = environmentValue("JOURNAL_STREAM") else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var info = stat()
        guard fstat(FileDescriptor.standardError.rawValue, &info) == 0 else { return false }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }

    /// Sends one entry made of `fields`.
    ///
    /// - Parameter fields: name and value pairs. Names are upper-case letters, digits and underscores, not starting
    ///   with an underscore (journald drops the others); values may hold any bytes, newlines included. Include
    ///   `MESSAGE` and `PRIORITY`.
    /// - Throws: ``Errno`` when the journal cannot be reached (sd_journal_sendv(3) returned a negative errno).
    public static func send(_ fields: [(name: String, value: String)]) throws(Errno) {
        var buffer: [UInt8] = []
        var ranges: [Range<Int>] = []
        for field in fields {
            let start = buffer.count
            buffer += field.name.utf8
            buffer.append(UInt8(ascii: "="))
            buffer += field.value.utf8
            ranges.append(start..<buffer.count)
        }
        let result = buffer.withUnsafeMutableBytes { raw -> Int32 in
            let vectors = ranges.map { range in
                iovec(iov_base: raw.baseAddress! + range.lowerBound, iov_len: range.count)
            }
            return vectors.withUnsafeBufferPointer { sd_journal_sendv($0.baseAddress, Int32($0.count)) }
        }
        if result < 0 { throw Errno(rawValue: -result) }
    }
}
