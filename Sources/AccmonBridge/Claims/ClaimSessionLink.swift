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

    /// Where the session is once connected.
    private enum Phase { case greeting, restoring, subscribing, live }

    let restoreID: String
    private let logger: Logger
    private var connection: AccmondConnection
    private var phase = Phase.greeting
    private var nextRequestID: Int64 = 1
    private var listID: Int64?
    private let codec = ProtocolCodec()

    init(socketPath: String, restoreID: String, logger: Logger) {
        connection = AccmondConnection(socketPath: socketPath)
        self.restoreID = restoreID
        self.logger = logger
    }

    var descriptor: FileDescriptor? { connection.descriptor }
    var isLive: Bool { if connection.descriptor != nil, case .live = phase { true } else { false } }
    var wantsWrite: Bool { connection.wantsWrite }
    var nextDeadline: UInt64? { connection.nextAttempt }

    func tick(now: UInt64) -> [Event] {
        switch connection.connectIfDue(now: now) {
        case nil: return []
        case .failure(let lost): return self.lost(lost.reason, now: now)
        case .success:
            phase = .greeting
            send(
                .hello(
                    versions: Array(WireFormat.supportedVersions), clientName: "mqtt-claim-gateway",
                    restoreID: restoreID))
            return []
        }
    }

    /// Sends `request`; returns its id.
    @discardableResult
    func send(_ request: ClientRequest) -> Int64 {
        let id = nextRequestID
        nextRequestID += 1
        connection.send(codec.encode(ClientMessage(id: .number(id), request)))
        return id
    }

    /// Asks for the claims on every accessory (answered as ``Event/claims(_:accessories:)``).
    func refreshClaims() {
        guard isLive else { return }
        listID = send(.list(.all, claims: true))
    }

    func read(now: UInt64) -> [Event] {
        let lines: [[UInt8]]
        switch connection.readLines() {
        case .success(let read): lines = read
        case .failure(let lost): return self.lost(lost.reason, now: now)
        }
        var events: [Event] = []
        for line in lines {
            if let event = EventLineReader.event(line) {
                connection.send(codec.encode(ClientMessage(.acknowledge(event.sequence))))
                continue
            }
            guard let message = try? codec.decodeServerMessage(line) else {
                return events + lost("accmond sent an unreadable line", now: now)
            }
            events += handle(message, now: now)
            if connection.descriptor == nil { break }
        }
        return events
    }

    private func handle(_ message: ServerMessage, now: UInt64) -> [Event] {
        switch (phase, message) {
        case (.greeting, .hello(_, _, _, _, let restored)):
            connection.sessionBegan()
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
            return lost("accmond refused the session: \(error.message)", now: now)
        case (_, .shutdown(let reason)):
            return lost("accmond stopped: \(reason)", now: now)
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
        connection.flush().map { lost($0.reason, now: now) } ?? []
    }

    /// The connection ended (or an attempt failed): said with the session's name, and retried with backoff.
    private func lost(_ reason: String, now: UInt64) -> [Event] {
        connection.lost("claims: \(reason)", now: now, logger: logger)
        return [.lost]
    }
}
