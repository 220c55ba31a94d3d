import CAccmonShims
import Glibc

/// Starts a detached POSIX thread running `body`, named `name` (at most 15 bytes show in `ps`).
///
/// For work that blocks (reading a socket, waiting on libudev) and so must stay off Swift's cooperative pool.
public func startThread(name: String, _ body: @escaping @Sendable () -> Void) throws(Errno) {
    final class Box: Sendable {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
    let box = Unmanaged.passRetained(Box(name: name, body: body)).toOpaque()
    var thread = pthread_t()
    let result = pthread_create(
        &thread, nil,
        { argument in
            let box = Unmanaged<Box>.fromOpaque(argument!).takeRetainedValue()
            CAccmonShims_nameThread(box.name)
            box.body()
            return nil
        }, box)
    guard result == 0 else {
        Unmanaged<Box>.fromOpaque(box).release()
        throw Errno(rawValue: result)
    }
    pthread_detach(thread)
}

/// Reads the environment variable `name`.
public func environmentValue(_ name: String) -> String? {
    getenv(name).map { String(cString: $0) }
}

/// Whether `descriptor` is a terminal.
public func isTerminal(_ descriptor: FileDescriptor) -> Bool {
    isatty(descriptor.rawValue) == 1
}

/// Shuts down both directions of a socket, waking a thread blocked reading it.
public func shutdownSocket(_ descriptor: FileDescriptor) {
    _ = Glibc.shutdown(descriptor.rawValue, Int32(SHUT_RDWR))
}
