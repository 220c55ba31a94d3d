import AccmonLogging
import AccmonProtocol
import AccmonSys
import Glibc

/// The claim gateway's own session with accmond (restore id `<restoreID>-claims`): subscribed to every accessory
/// with claims (so that the session is kept when the bridge goes away, with the claims it made with `preserve`), its
/// events acknowledged at once (the event path is the other session's), its replies and notices handed over.
final class ClaimSessionLink {
    enum Event {
        /// A session began; `restored` when accmond gave back the kept one (with its claims).
        case session(restored: Bool)
        /// A reply to a request this link sent.
        case reply(id: Int64, ServerMessage)
        case notice(ClaimNotice)
        case update(ClaimUpdate)
        /// The view of claims as a whole (a subscription's or a list's snapshot).
        case claims([ConnectionID: ClaimSummary], accessories: [Accessory])
        case lost
    }

    private enum Phase { case waiting(until: UInt64), greeting, restoring, subscribing, live }

    let socketPath: String
    let restoreID: String
    private let logger: Logger
    private(set) var descriptor: FileDescriptor?
    private var phase = Phase.waiting(until: 0)
    private var framer = LineFramer(limit: 64 << 20)
    private var outbound: [UInt8] = []
    private var backoff = Backoff(ceilingSeconds: 5)
    private var nextRequestID: Int64 = 1
    private var listID: Int64?
    private var buffer = [UInt8](repeating: 0, count: 65_536)
    private let codec = ProtocolCodec()

    init(socketPath: String, restoreID: String, logger: Logger) {
        self.socketPath = socketPath
        self.restoreID = restoreID
        self.logger = logger
    }

    var isLive: Bool { if case .live = phase { true } else { false } }
    var wantsWrite: Bool { !outbound.isEmpty }
    var nextDeadline: UInt64? { if case .waiting(let until) = phase { until } else { nil } }

    func tick(now: UInt64) -> [Event] {
        guard case .waiting(let until) = phase, now >= until else { return [] }
        do {
            let socket = try UnixSocket.connect(path: socketPath)
            try socket.setNonBlocking()
            descriptor = socket
        } catch {
            return lost("claims: accmond: \(socketPath): \(error)", now: now)
        }
        framer = LineFramer(limit: 64 << 20)
        outbound = []
        phase = .greeting
        _ = send(.hello(versions: Array(WireFormat.supportedVersions), clientName: "mqtt-claim-gateway", restoreID: restoreID))
        return []
    }

    /// Sends `request`; returns its id.
    @discardableResult
    func send(_ request: ClientRequest) -> Int64 {
        let id = nextRequestID
        nextRequestID += 1
        outbound += codec.encode(ClientMessage(id: .number(id), request))
        return id
    }

    /// Asks for the claims on every accessory (answered as ``Event/claims(_:accessories:)``).
    func refreshClaims() {
        guard isLive else { return }
        listID = send(.list(.all, claims: true))
    }

    func read(now: UInt64) -> [Event] {
        guard let descriptor else { return [] }
        let result = buffer.withUnsafeMutableBytes { raw in
            Result { () throws(Errno) -> Int in try descriptor.receive(into: raw) }
        }
        let count: Int
        switch result {
        case .success(0): return lost("claims: accmond closed the connection", now: now)
        case .success(let read): count = read
        case .failure(.wouldBlock), .failure(.interrupted): return []
        case .failure(let error): return lost("claims: accmond: read: \(error)", now: now)
        }
        var events: [Event] = []
        for item in framer.append(buffer[..<count]) {
            guard case .line(let line) = item else { continue }
            if let event = EventLineReader.event(line) {
                outbound += codec.encode(ClientMessage(.acknowledge(event.sequence)))
                continue
            }
            guard let message = try? codec.decodeServerMessage(line) else {
                return events + lost("claims: accmond sent an unreadable line", now: now)
            }
            events += handle(message, now: now)
            if descriptor != self.descriptor { break }
        }
        return events
    }

    private func handle(_ message: ServerMessage, now: UInt64) -> [Event] {
        switch (phase, message) {
        case (.greeting, .hello(_, _, _, _, let restored)):
            backoff.succeeded()
            if restored {
                phase = .restoring
            } else {
                phase = .subscribing
                _ = send(.subscribe(.all, claims: true))
            }
            return []
        case (.restoring, .restored):
            phase = .live
            listID = send(.list(.all, claims: true))
            return [.session(restored: true)]
        case (.subscribing, .snapshot(_, let snapshot)):
            phase = .live
            return [.claims(snapshot.claims, accessories: snapshot.accessories), .session(restored: false)]
        case (.greeting, .error(_, let error)), (.subscribing, .error(_, let error)):
            return lost("claims: accmond refused the session: \(error.message)", now: now)
        case (_, .shutdown(let reason)):
            return lost("claims: accmond stopped: \(reason)", now: now)
        case (_, .list(.number(let id)?, let snapshot)) where id == listID:
            return [.claims(snapshot.claims, accessories: snapshot.accessories)]
        case (_, .claimNotice(let notice)): return [.notice(notice)]
        case (_, .claimUpdate(let update)): return [.update(update)]
        case (_, .claim(.number(let id)?, _)), (_, .claims(.number(let id)?, _)), (_, .ok(.number(let id)?, _)),
            (_, .error(.number(let id)?, _)):
            return [.reply(id: id, message)]
        default: return []
        }
    }

    func flush(now: UInt64) -> [Event] {
        guard let descriptor, !outbound.isEmpty else { return [] }
        let result = outbound.withUnsafeBytes { raw in
            Result { () throws(Errno) -> Int in try descriptor.write(raw) }
        }
        switch result {
        case .success(let written): outbound.removeFirst(written)
        case .failure(.wouldBlock), .failure(.interrupted): break
        case .failure(let error): return lost("claims: accmond: write: \(error)", now: now)
        }
        return []
    }

    private func lost(_ reason: String, now: UInt64) -> [Event] {
        descriptor?.close()
        descriptor = nil
        let delay = backoff.failed()
        phase = .waiting(until: now + nanoseconds(delay))
        logger.log(
            backoff.isWorthReporting ? .warning : .debug, .bridgeAccmond,
            "\(reason); next attempt in \(delay) s (attempt \(backoff.failures))")
        return [.lost]
    }
}
