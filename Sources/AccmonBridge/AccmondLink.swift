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

    /// Where the session is once connected.
    private enum Phase {
        case greeting
        case restoring
        case subscribing
        case live
    }

    private let restoreID: String
    private let logger: Logger
    private var connection: AccmondConnection
    private var phase = Phase.greeting
    private var nextRequestID: Int64 = 1
    private let codec = ProtocolCodec()
    /// Whether `suspend` was the last of `suspend` and `resume` sent in this session.
    private(set) var isSuspended = false

    init(socketPath: String, restoreID: String, logger: Logger) {
        connection = AccmondConnection(socketPath: socketPath)
        self.restoreID = restoreID
        self.logger = logger
    }

    var socketPath: String { connection.socketPath }
    var descriptor: FileDescriptor? { connection.descriptor }
    /// Subscribed and live: events flow, acknowledgements count.
    var isLive: Bool { if connection.descriptor != nil, case .live = phase { true } else { false } }
    var wantsWrite: Bool { connection.wantsWrite }
    var nextDeadline: UInt64? { connection.nextAttempt }

    /// Connects when a retry is due.
    func tick(now: UInt64) {
        switch connection.connectIfDue(now: now) {
        case nil: return
        case .failure(let lost): self.lost(lost.reason, now: now)
        case .success:
            isSuspended = false
            phase = .greeting
            send(.hello(versions: Array(WireFormat.supportedVersions), clientName: "accmon-mqtt", restoreID: restoreID))
        }
    }

    /// Reads what the socket holds (up to one buffer) and returns the events; call when it is readable.
    func read(now: UInt64) -> [Event] {
        let lines: [[UInt8]]
        switch connection.readLines() {
        case .success(let read): lines = read
        case .failure(let lost):
            self.lost(lost.reason, now: now)
            return []
        }
        var events: [Event] = []
        for line in lines {
            if !handle(line, into: &events, now: now) { break }
        }
        return events
    }

    /// Writes what waits; call when the socket is writable.
    func flush(now: UInt64) {
        if let lost = connection.flush() { self.lost(lost.reason, now: now) }
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
        connection.close()
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
            connection.sessionBegan()
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
        connection.send(codec.encode(ClientMessage(id: id, request)))
    }

    private func lost(_ reason: String, now: UInt64) {
        connection.lost(reason, now: now, logger: logger)
    }
}
