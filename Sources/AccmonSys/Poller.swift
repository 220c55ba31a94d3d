import CAccmonShims
import Glibc

/// Readiness the ``Poller`` watches for.
public struct Interest: OptionSet, Sendable, Hashable {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    /// Readable (`EPOLLIN`).
    public static let readable = Interest(rawValue: EPOLLIN.rawValue)
    /// Writable (`EPOLLOUT`).
    public static let writable = Interest(rawValue: EPOLLOUT.rawValue)
}

/// One readiness report from ``Poller/wait(timeoutMilliseconds:)``.
public struct Readiness: Sendable, Hashable {
    /// The registration token given to ``Poller/add(_:interest:token:)``.
    public var token: UInt64
    /// Data can be read (or the peer hung up: a read then returns 0 or an error).
    public var readable: Bool
    /// Data can be written.
    public var writable: Bool
    /// The peer hung up or the descriptor is in error.
    public var hangup: Bool
}

/// An `epoll` instance. Owned by one thread.
public struct Poller: ~Copyable {
    private let epoll: Int32
    private var events: [epoll_event]
    /// The last wait's reports. Kept so that a wait reuses the storage once the caller has let go of the previous
    /// result, as a loop does by the next turn: no allocation per wait.
    private var ready: [Readiness] = []

    /// Creates an epoll instance.
    public init(capacity: Int = 256) throws(Errno) {
        epoll = try valueOrErrno { epoll_create1(Int32(EPOLL_CLOEXEC)) }
        events = Array(repeating: epoll_event(), count: capacity)
    }

    deinit { Glibc.close(epoll) }

    /// The epoll descriptor itself: readable while any watched descriptor is ready, so one poller can be watched
    /// by another. It stays owned by this poller.
    public var descriptor: FileDescriptor { FileDescriptor(rawValue: epoll) }

    /// Watches `fd` for `interest`, reporting `token`.
    public func add(_ fd: FileDescriptor, interest: Interest, token: UInt64) throws(Errno) {
        try control(EPOLL_CTL_ADD, fd, interest, token)
    }

    /// Changes what `fd` is watched for.
    public func modify(_ fd: FileDescriptor, interest: Interest, token: UInt64) throws(Errno) {
        try control(EPOLL_CTL_MOD, fd, interest, token)
    }

    /// Stops watching `fd`.
    public func remove(_ fd: FileDescriptor) {
        _ = epoll_ctl(epoll, EPOLL_CTL_DEL, fd.rawValue, nil)
    }

    /// Waits for readiness, up to `timeoutMilliseconds` (-1: forever).
    public mutating func wait(timeoutMilliseconds: Int32) throws(Errno) -> [Readiness] {
        let epoll = epoll
        let count = try events.withUnsafeMutableBufferPointer { (buffer) throws(Errno) -> Int32 in
            try valueOrErrno { epoll_wait(epoll, buffer.baseAddress, Int32(buffer.count), timeoutMilliseconds) }
        }
        ready.removeAll(keepingCapacity: true)
        for event in events[..<Int(count)] {
            ready.append(
                Readiness(
                    token: event.data.u64,
                    readable: event.events & EPOLLIN.rawValue != 0,
                    writable: event.events & EPOLLOUT.rawValue != 0,
                    hangup: event.events & (EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0))
        }
        return ready
    }

    private func control(_ op: Int32, _ fd: FileDescriptor, _ interest: Interest, _ token: UInt64) throws(Errno) {
        var event = epoll_event()
        event.events = interest.rawValue
        event.data.u64 = token
        _ = try valueOrErrno { epoll_ctl(epoll, op, fd.rawValue, &event) }
    }
}

/// An `eventfd` used to wake a poller from another thread.
public struct WakeupEvent: Sendable {
    /// The descriptor to watch for readability.
    public let descriptor: FileDescriptor

    /// Creates a non-blocking eventfd.
    public init() throws(Errno) {
        descriptor = FileDescriptor(
            rawValue: try valueOrErrno { eventfd(0, Int32(EFD_NONBLOCK) | Int32(EFD_CLOEXEC)) })
    }

    /// Wakes the poller. Safe from any thread.
    public func signal() {
        var one: UInt64 = 1
        _ = Glibc.write(descriptor.rawValue, &one, 8)
    }

    /// Clears pending wakeups.
    public func drain() {
        var value: UInt64 = 0
        _ = Glibc.read(descriptor.rawValue, &value, 8)
    }
}

/// A one-shot `timerfd` on the monotonic clock: readable once it expires, until ``takeExpiry()``.
public struct OneShotTimer: ~Copyable {
    /// The descriptor to watch for readability.
    public let descriptor: FileDescriptor

    /// Creates a disarmed, non-blocking timer.
    public init() throws(Errno) {
        descriptor = FileDescriptor(
            rawValue: try valueOrErrno { timerfd_create(CLOCK_MONOTONIC, Int32(TFD_NONBLOCK) | Int32(TFD_CLOEXEC)) })
    }

    deinit { descriptor.close() }

    /// Arms the timer to expire once, `milliseconds` from now (replacing an earlier arming).
    public func arm(milliseconds: Int) {
        var setting = itimerspec()
        setting.it_value.tv_sec = milliseconds / 1000
        setting.it_value.tv_nsec = (milliseconds % 1000) * 1_000_000
        _ = timerfd_settime(descriptor.rawValue, 0, &setting, nil)
    }

    /// Whether the timer has expired since the last call; clears the expiry.
    public func takeExpiry() -> Bool {
        var expirations: UInt64 = 0
        return Glibc.read(descriptor.rawValue, &expirations, 8) == 8
    }
}

/// A `signalfd` for a set of signals, which the process must block first with ``block(_:)``.
public struct SignalDescriptor: Sendable {
    /// The descriptor to watch for readability.
    public let descriptor: FileDescriptor

    /// Blocks `signals` in the calling thread and the threads it creates later. Call first thing in `main`.
    public static func block(_ signals: [Int32]) {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals { sigaddset(&set, signal) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Creates a non-blocking signalfd for `signals`.
    public init(_ signals: [Int32]) throws(Errno) {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals { sigaddset(&set, signal) }
        descriptor = FileDescriptor(
            rawValue: try valueOrErrno { signalfd(-1, &set, Int32(SFD_NONBLOCK) | Int32(SFD_CLOEXEC)) })
    }

    /// Reads the next pending signal number, or `nil`.
    public func next() -> Int32? {
        var info = signalfd_siginfo()
        let count = Glibc.read(descriptor.rawValue, &info, MemoryLayout<signalfd_siginfo>.size)
        return count == MemoryLayout<signalfd_siginfo>.size ? Int32(info.ssi_signo) : nil
    }
}

/// Ignores `SIGPIPE` for the process, so that writes to closed sockets fail with `EPIPE` instead.
public func ignoreBrokenPipeSignal() {
    signal(SIGPIPE, SIG_IGN)
}

/// Monotonic time in nanoseconds.
public func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// A one-shot signal one thread waits on (blocking) until another raises it.
public final class BlockingSignal: Sendable {
    private let descriptor: FileDescriptor

    /// Creates a blocking eventfd.
    public init() throws(Errno) {
        descriptor = FileDescriptor(rawValue: try valueOrErrno { eventfd(0, Int32(EFD_CLOEXEC)) })
    }

    deinit { descriptor.close() }

    /// Raises the signal. Safe from any thread.
    public func signal() {
        var one: UInt64 = 1
        _ = Glibc.write(descriptor.rawValue, &one, 8)
    }

    /// Blocks until the signal is raised. Not for the cooperative pool.
    public func wait() {
        var value: UInt64 = 0
        while Glibc.read(descriptor.rawValue, &value, 8) < 0 && errno == EINTR {}
    }

    /// Blocks until the signal is raised or `timeoutMilliseconds` pass; returns whether it was raised (and takes
    /// it). Not for the cooperative pool.
    public func wait(timeoutMilliseconds: Int32) -> Bool {
        var waiting = pollfd(fd: descriptor.rawValue, events: Int16(POLLIN), revents: 0)
        while true {
            let result = poll(&waiting, 1, timeoutMilliseconds)
            if result > 0 { break }
            if result == 0 || errno != EINTR { return false }
        }
        wait()
        return true
    }
}
