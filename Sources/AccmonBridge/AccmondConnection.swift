import AccmonLogging
import AccmonProtocol
import AccmonSys
import Glibc

/// The transport under a session with accmond, on the bridge's loop (``AccmondLink``, ``ClaimSessionLink``): a
/// non-blocking connection made when an attempt is due, what it reads framed into lines, what is sent held until the
/// socket takes it, and the backoff between attempts. The sessions speak the protocol over it.
struct AccmondConnection {
    /// Why a connection attempt failed or a connection ended, for the log.
    struct Lost: Error {
        var reason: String
    }

    /// Bytes read per turn of the loop: the bridge stays responsive to the broker during a burst.
    private static let readSize = 65_536

    let socketPath: String
    private(set) var descriptor: FileDescriptor?
    /// When the next attempt is due, while there is no connection.
    private(set) var nextAttempt: UInt64? = 0
    private var backoff = Backoff(ceilingSeconds: 5)
    private var framer = LineFramer(limit: 64 << 20)
    private var outbound: [UInt8] = []
    private var buffer = [UInt8](repeating: 0, count: readSize)

    init(socketPath: String) {
        self.socketPath = socketPath
    }

    var wantsWrite: Bool { !outbound.isEmpty }

    /// Connects when an attempt is due (with nothing read or sent yet). Returns `nil` when none is, else how the
    /// attempt went.
    mutating func connectIfDue(now: UInt64) -> Result<Void, Lost>? {
        guard descriptor == nil, let due = nextAttempt, now >= due else { return nil }
        let socket: FileDescriptor
        do {
            socket = try UnixSocket.connect(path: socketPath)
        } catch {
            return .failure(Lost(reason: Self.connectProblem(error)))
        }
        do {
            try socket.setNonBlocking()
        } catch {
            socket.close()
            return .failure(Lost(reason: "accmond: \(socketPath): \(error)"))
        }
        descriptor = socket
        nextAttempt = nil
        framer = LineFramer(limit: 64 << 20)
        outbound = []
        return .success(())
    }

    /// The complete lines the socket holds (one read, up to a buffer; none when it has nothing yet), or why the
    /// connection ended. Call when it is readable.
    mutating func readLines() -> Result<[[UInt8]], Lost> {
        guard let descriptor else { return .success([]) }
        let result = buffer.withUnsafeMutableBytes { raw in
            Result { () throws(Errno) -> Int in try descriptor.receive(into: raw) }
        }
        switch result {
        case .success(0):
            return .failure(Lost(reason: "accmond closed the connection"))
        case .success(let count):
            return .success(
                framer.append(buffer[..<count]).compactMap {
                    if case .line(let line) = $0 { line } else { nil }
                })
        case .failure(.wouldBlock), .failure(.interrupted):
            return .success([])
        case .failure(let error):
            return .failure(Lost(reason: "accmond: read: \(error)"))
        }
    }

    /// Queues bytes to send.
    mutating func send(_ bytes: some Sequence<UInt8>) {
        outbound += bytes
    }

    /// Writes what waits, as much as the socket takes; returns why the connection ended when it did. Call when it is
    /// writable.
    mutating func flush() -> Lost? {
        guard let descriptor, !outbound.isEmpty else { return nil }
        let result = outbound.withUnsafeBytes { raw in
            Result { () throws(Errno) -> Int in try descriptor.write(raw) }
        }
        switch result {
        case .success(let written): outbound.removeFirst(written)
        case .failure(.wouldBlock), .failure(.interrupted): break
        case .failure(let error): return Lost(reason: "accmond: write: \(error)")
        }
        return nil
    }

    /// A session began on the connection: the next loss retries soon again.
    mutating func sessionBegan() {
        backoff.succeeded()
    }

    /// Closes the connection after `reason` (an attempt failed, or the connection ended), logs it with the delay, and
    /// schedules the next attempt.
    mutating func lost(_ reason: String, now: UInt64, logger: Logger) {
        close()
        let delay = backoff.failed()
        nextAttempt = now + nanoseconds(delay)
        logger.log(
            backoff.isWorthReporting ? .warning : .debug, .bridgeAccmond,
            "\(reason); reconnecting in \(delay) s (attempt \(backoff.failures))")
    }

    /// Closes the connection without a next attempt (the bridge stops).
    mutating func close() {
        descriptor?.close()
        descriptor = nil
    }

    private static func connectProblem(_ error: SocketError) -> String {
        switch error.errno {
        case .permissionDenied, .notPermitted:
            "accmond: cannot connect to '\(error.path)': \(error.errno); is the service's user in the 'accmon' group?"
        default:
            "accmond: cannot connect to '\(error.path)': \(error.errno); is accmond running? "
                + "(`systemctl status accmond`)"
        }
    }
}
