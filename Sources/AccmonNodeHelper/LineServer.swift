public import AccmonLogging
public import AccmonNodes
public import AccmonSys
import AccmonSystemd
import Glibc

/// What a ``LineServer`` serves: the node helper (``NodeService``) or the opener scanner (``OpenerScanService``).
public protocol LineService: AnyObject {
    /// The longest request line read; a longer one ends the connection.
    var maximumRequestBytes: Int { get }
    /// A descriptor of the service's own to watch besides the clients (the node keeper's change watch), if any.
    var watchedDescriptor: FileDescriptor? { get }
    /// Called once before the first client is served.
    func start()
    /// Called when ``watchedDescriptor`` is readable.
    func watchedDescriptorIsReadable()
    /// The reply line (newline included) to a request line (without its newline) of `peer`, and a descriptor to
    /// pass with it, which the server closes once sent.
    func answer(_ line: [UInt8], from peer: PeerCredentials) -> (line: [UInt8], descriptor: FileDescriptor?)
    /// A reply line, without an id, that refuses what is not a request: a client not allowed, a line too long.
    func refusal(_ error: NodeError) -> [UInt8]
    /// Called after every turn of the loop.
    func endOfTurn()
}

/// The loop of `accmon-nodes` in each of its serving modes: one thread, `poll` over a signalfd (SIGTERM, SIGINT), the
/// listening socket, the service's watched descriptor and the clients. A client is accepted only when the kernel's
/// credentials of its socket (`SO_PEERCRED`) name the allowed user; anyone else gets one `not-permitted` reply and
/// is closed. Each request line gets its reply before the next line is read. Under a service manager's watchdog
/// (`WATCHDOG_USEC`) it pings every half interval from the loop itself, so a loop stuck in a system call is
/// restarted.
public final class LineServer {
    /// At most this many clients at once (accmond needs one; a restarted accmond's new one may meet the old).
    public static let maximumClients = 8

    private struct Client {
        var descriptor: FileDescriptor
        var peer: PeerCredentials
        var buffer: [UInt8] = []
    }

    private let listener: FileDescriptor
    private let service: any LineService
    private let allowedUID: uid_t
    private let allowedUser: String
    private let name: String
    private let logger: Logger
    private var clients: [Client] = []

    /// - Parameters:
    ///   - listener: a listening Unix stream socket (from the service manager, or bound by the program).
    ///   - allowedUID: the only user whose clients are served.
    ///   - allowedUser: that user, for messages: `accmond (uid 105)`.
    ///   - name: what the server is, in refusals: `accmon-nodes`.
    public init(
        listener: FileDescriptor, service: any LineService, allowedUID: uid_t, allowedUser: String, name: String,
        logger: Logger
    ) {
        self.listener = listener
        self.service = service
        self.allowedUID = allowedUID
        self.allowedUser = allowedUser
        self.name = name
        self.logger = logger
    }

    /// Serves until SIGTERM or SIGINT, which must be blocked (``SignalDescriptor/block(_:)``) before any thread
    /// starts.
    public func run() throws(Errno) {
        let signals = try SignalDescriptor([SIGTERM, SIGINT])
        defer { signals.descriptor.close() }
        let clock = ContinuousClock()
        // try?: no watchdog asked for, or WATCHDOG_USEC unreadable: none
        let watchdog = (try? ServiceManager.watchdogIntervalMicroseconds()).flatMap { $0 }.map {
            Duration.microseconds(Int64($0) / 2)
        }
        var nextPing = clock.now
        service.start()
        service.endOfTurn()
        while true {
            if let watchdog, clock.now >= nextPing {
                _ = try? ServiceManager.notify("WATCHDOG=1")  // try?: a manager that is gone restarts nothing
                nextPing = clock.now + watchdog
            }
            let watch = service.watchedDescriptor
            let fixed = [signals.descriptor, listener] + (watch.map { [$0] } ?? [])
            var timeout: Int32 = -1
            if watchdog != nil {
                let (seconds, attoseconds) = max(.zero, nextPing - clock.now).components
                timeout = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
            }
            let ready = try waitForReadable(fixed + clients.map(\.descriptor), timeoutMilliseconds: timeout).ready
            if ready[0], let signal = signals.next() {
                logger.info(.stopping, "signal \(signal): stopping")
                for client in clients { client.descriptor.close() }
                return
            }
            let polled = clients.count
            // From the last, so that removing a closed client keeps the others' indices; before accepting, which
            // appends.
            for index in (0..<polled).reversed() where ready[fixed.count + index] { serve(index) }
            if watch != nil && ready[2] { service.watchedDescriptorIsReadable() }
            if ready[1] { accept() }
            service.endOfTurn()
        }
    }

    private func accept() {
        let descriptor: FileDescriptor
        do throws(Errno) {
            guard let accepted = try UnixSocket.accept(listener) else { return }
            descriptor = accepted
            try descriptor.setNonBlocking(false)
            // A client that stops reading its replies is closed after 5 s rather than holding the server.
            UnixSocket.setSendTimeout(descriptor, seconds: 5)
        } catch {
            logger.warning(.transportFailure, "accept: \(error)")
            if error == .processOutOfDescriptors || error == .systemOutOfDescriptors { usleep(100_000) }
            return
        }
        let peer: PeerCredentials
        do throws(Errno) {
            peer = try UnixSocket.peerCredentials(descriptor)
        } catch {
            logger.warning(.nodeRefusal, "a client whose credentials cannot be read: \(error)")
            descriptor.close()
            return
        }
        let who = "uid \(peer.uid) (pid \(peer.pid))"
        guard peer.uid == allowedUID else {
            refuse(descriptor, who, "only \(allowedUser) may use this \(name == "accmon-nodes" ? "helper" : "scanner")")
            return
        }
        guard clients.count < Self.maximumClients else {
            refuse(descriptor, who, "\(Self.maximumClients) clients are connected already")
            return
        }
        logger.debug(.clientConnected, "client \(who) connected", ["client.pid": "\(peer.pid)"])
        clients.append(Client(descriptor: descriptor, peer: peer))
    }

    private func refuse(_ descriptor: FileDescriptor, _ who: String, _ reason: String) {
        let error = NodeError(.notPermitted, name, who, reason)
        logger.warning(.nodeRefusal, "refused a client: \(error)")
        try? descriptor.sendAll(service.refusal(error))  // try?: it is closed either way
        descriptor.close()
    }

    private func serve(_ index: Int) {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        var received = 0
        var failure: Errno?
        chunk.withUnsafeMutableBytes { raw in
            do throws(Errno) { received = try clients[index].descriptor.receive(into: raw) } catch { failure = error }
        }
        guard failure == nil, received > 0 else { return close(index, failure.map { "read: \($0)" }) }
        clients[index].buffer += chunk[..<received]
        while let newline = clients[index].buffer.firstIndex(of: 0x0A) {
            let line = Array(clients[index].buffer[..<newline])
            clients[index].buffer.removeSubrange(...newline)
            let reply = service.answer(line, from: clients[index].peer)
            do throws(Errno) {
                defer { reply.descriptor?.close() }
                if let passed = reply.descriptor {
                    try clients[index].descriptor.sendAll(reply.line, passing: passed)
                } else {
                    try clients[index].descriptor.sendAll(reply.line)
                }
            } catch {
                return close(index, "write: \(error)")
            }
        }
        if clients[index].buffer.count > service.maximumRequestBytes {
            let error = NodeError(.badRequest, "request", "line", "longer than \(service.maximumRequestBytes) bytes")
            try? clients[index].descriptor.sendAll(service.refusal(error))  // try?: closed anyway
            close(index, "\(error)")
        }
    }

    private func close(_ index: Int, _ reason: String?) {
        let client = clients.remove(at: index)
        client.descriptor.close()
        logger.debug(
            .clientDisconnected,
            "client uid \(client.peer.uid) (pid \(client.peer.pid)) disconnected" + (reason.map { ": \($0)" } ?? ""))
    }
}
