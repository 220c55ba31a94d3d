import Glibc

/// A POSIX error number, with `strerror` text as its description.
public struct Errno: Error, RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's current `errno`.
    public static var current: Errno { Errno(rawValue: errno) }

    /// `EAGAIN`: the operation would block.
    public static let wouldBlock = Errno(rawValue: EAGAIN)
    /// `EINTR`: interrupted by a signal.
    public static let interrupted = Errno(rawValue: EINTR)
    /// `ENOENT`: no such file or directory.
    public static let noSuchFileOrDirectory = Errno(rawValue: ENOENT)
    /// `ECONNREFUSED`: nothing listens on the socket.
    public static let connectionRefused = Errno(rawValue: ECONNREFUSED)
    /// `EACCES`: permission denied.
    public static let permissionDenied = Errno(rawValue: EACCES)
    /// `EPERM`: operation not permitted.
    public static let notPermitted = Errno(rawValue: EPERM)
    /// `EPIPE`: the peer closed the connection.
    public static let brokenPipe = Errno(rawValue: EPIPE)
    /// `ECONNRESET`: the peer reset the connection.
    public static let connectionReset = Errno(rawValue: ECONNRESET)
    /// `EADDRINUSE`: the address is in use.
    public static let addressInUse = Errno(rawValue: EADDRINUSE)
    /// `EMFILE`: the process has as many descriptors open as its limit allows.
    public static let processOutOfDescriptors = Errno(rawValue: EMFILE)
    /// `ENFILE`: the system has as many files open as it allows.
    public static let systemOutOfDescriptors = Errno(rawValue: ENFILE)

    public var description: String { String(cString: strerror(rawValue)) }
}

/// Runs a libc call that returns -1 and sets `errno` on failure, retrying on `EINTR` when asked.
@inline(__always)
func valueOrErrno<T: FixedWidthInteger>(retryOnInterrupt: Bool = true, _ body: () -> T) throws(Errno) -> T {
    while true {
        let result = body()
        if result != -1 { return result }
        let error = Errno.current
        if retryOnInterrupt && error == .interrupted { continue }
        precondition(error.rawValue != EBADF && error.rawValue != EFAULT, "bug: \(error) (errno \(error.rawValue))")
        throw error
    }
}
