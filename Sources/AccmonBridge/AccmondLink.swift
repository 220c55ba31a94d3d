import AccmonLogging
import AccmonProtocol
import AccmonSys
import Glibc

/// The bridge's session with accmond, spoken on the bridge's own loop: `hello` with the restore id, then the restore
/// or a subscription, then events; acknowledgements, `suspend` and `resume` when the bridge says so. Reconnects with
/// backoff.
///
/// The bridge speaks the protocol here rather than through `AccmonSession`, which acknowledges an event when the app
/// asks for the next one and buffers events without bound in an `AsyncStream`: the bridge must acknowledge only after
/// the broker's PUBACK, with many publications in flight, and must stop taking events while the broker is away so
/// that accmond holds them in its coalescing queue (flat memory, `accmon status` shows the session suspended).
final class AccmondLink {
    enum Event {
        /// A session began: accmond's truth is `accessories` (a snapshot, or a restore's known accessories whose
        /// replay follows as events).
        case session(accessories: [Accessory], restored: Bool)
        case event(RelayedEvent)
    }

    private enum Phase {
        case waiting(until: UInt64)
        case greeting
        case restoring
        case subscribing
        case live
    }

    /// Bytes read per turn of the loop: the bridge stays responsive to the broker during a burst.
    private static let readSize = 65_536

    let socketPath: String
    private let restoreID: String
    private let logger: Logger
    private(set) var descriptor: FileDescriptor?
    private var phase = Phase.waiting(until: 0)
    private var framer = LineFramer(limit: 64 << 20)
    private var outbound: [UInt8] = []
    private var backoff = Backoff(ceilingSeconds: 5)
    private var nextRequestID: Int64 = 1
    private var buffer = [UInt8](repeating: 0, count: readSize)
    private let codec = ProtocolCodec()
    /// Whether `suspend` was the last of `suspend` and `resume` sent in this session.
    private(set) var isSuspended = false

    init(socketPath: String, restoreID: String, logger: Logger) {
        self.socketPath = socketPath
        self.restoreID = restoreID
        self.logger = logger
    }

    /// Subscribed and live: events flow, acknowledgements count.
    var isLive: Bool { if case .live = phase { true } else { false } }
    var wantsWrite: Bool { !outbound.isEmpty }
    var nextDeadline: UInt64? { if case .waiting(let until) = phase { until } else { nil } }

    /// Connects when a retry is due.
    func tick(now: UInt64) {
        guard case .waiting(let until) = phase, now >= until else { return }
        do {
            let socket = try UnixSocket.connect(path: socketPath)
            try socket.setNonBlocking()
            descriptor = socket
        } catch let error as SocketError {
            lost(Self.connectProblem(error), now: now)
            return
        } catch {
            lost("accmond: \(socketPath): \(error)", now: now)
            return
        }
        framer = LineFramer(limit: 64 << 20)
        outbound = []
        isSuspended = false
        phase = .greeting
        send(.hello(versions: Array(WireFormat.supportedVersions), clientName: "accmon-mqtt", restoreID: restoreID))
    }

    /// Reads what the socket holds (up to one buffer) and returns the events; call when it is readable.
    func read(now: UInt64) -> [Event] {
        guard let descriptor else { return [] }
        let result = buffer.withUnsafeMutableBytes { raw in
            Result { () throws(Errno) -> Int in try descriptor.receive(into: raw) }
        }
        let count: Int
        switch result {
        case .success(0):
            lost("accmond closed the connection", now: now)
            return []
        case .success(let read): count = read
        case .failure(.wouldBlock), .failure(.interrupted): return []
        case .failure(let error):
            lost("accmond: read: \(error)", now: now)
            return []
        }
        var events: [Event] = []
        for item in framer.append(buffer[..<count]) {
            guard case .line(let line) = item else { continue }
            if !handle(line, into: &events, now: now) { break }
        }
        return events
    }

    /// Writes what waits; call when the socket is writable.
    func flush(now: UInt64) {
        guard let descriptor, !outbound.isEmpty else { return }
        let result = outbound.withUnsafeBytes { raw in
            Result { () throws(Errno) -> Int in try descriptor.write(raw) }
        }
        switch result {
        case .success(let written): outbound.removeFirst(written)
        case .failure(.wouldBlock), .failure(.interrupted): break
        case .failure(let error): lost("accmond: write: \(error)", now: now)
        }
    }

    /// Acknowledges every event up to `sequence` (the broker confirmed them).
    func acknowledge(_ sequence: UInt64) {
        if isLive { send(.acknowledge(sequence)) }
    }

    /// Asks accmond to hold (`true`) or deliver (`false`) the events, when that is not already the case.
    func setSuspended(_ suspended: Bool) {
        guard isLive, suspended != isSuspended else { return }
        isSuspended = suspended
        logger.debug(.bridgeAccmond, suspended ? "accmond: suspend (the broker is not ready)" : "accmond: resume")
        send(suspended ? .suspend : .resume)
    }

    /// Closes the connection (the bridge stops): accmond keeps the session for its restore id.
    func close() {
        descriptor?.close()
        descriptor = nil
    }

    // MARK: Lines

    /// Handles one line; returns false when it ended the connection.
    private func handle(_ line: [UInt8], into events: inout [Event], now: UInt64) -> Bool {
        if let event = EventLineReader.event(line) {
            events.append(.event(RelayedEvent(event: event, line: line)))
            return true
        }
        let message: ServerMessage
        do throws(ProtocolError) {
            message = try codec.decodeServerMessage(line)
        } catch {
            lost("accmond sent an unreadable line: \(error.message)", now: now)
            return false
        }
        switch (phase, message) {
        case (_, .event(let event)):
            // Not in the canonical form (another writer): published as the codec writes it.
            events.append(.event(RelayedEvent(event: event, line: Array(codec.encode(message).dropLast()))))
        case (.greeting, .hello(_, _, _, let session, let restored)):
            backoff.succeeded()
            logger.info(
                .bridgeAccmond,
                restored ? "accmond: session '\(restoreID)' restored" : "accmond: new session '\(restoreID)'",
                ["accmond.session": session])
            if restored {
                phase = .restoring
            } else {
                phase = .subscribing
                send(.subscribe(.all))
            }
        case (.restoring, .restore(let state)):
            events.append(.session(accessories: state.accessories, restored: true))
        case (.restoring, .restored):
            phase = .live
        case (.subscribing, .snapshot(_, let snapshot)):
            events.append(.session(accessories: snapshot.accessories, restored: false))
            phase = .live
        case (_, .shutdown(let reason)):
            lost("accmond stopped: \(reason)", now: now)
            return false
        case (.greeting, .error(_, let error)), (.subscribing, .error(_, let error)):
            lost("accmond refused the session: \(error.message)", now: now)
            return false
        case (_, .error(_, let error)):
            logger.warning(.bridgeAccmond, "accmond: \(error.message) (\(error.code))")
        default:
            break
        }
        return true
    }

    private func send(_ request: ClientRequest) {
        let id: RequestID?
        if case .acknowledge = request {
            id = nil
        } else {
            id = .number(nextRequestID)
            nextRequestID += 1
        }
        outbound += codec.encode(ClientMessage(id: id, request))
    }

    private func lost(_ reason: String, now: UInt64) {
        descriptor?.close()
        descriptor = nil
        let delay = backoff.failed()
        phase = .waiting(until: now + nanoseconds(delay))
        logger.log(
            backoff.isWorthReporting ? .warning : .debug, .bridgeAccmond,
            "\(reason); reconnecting in \(delay) s (attempt \(backoff.failures))")
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
