import AccmonLogging
import AccmonManifest
import AccmonProtocol
import AccmonSys

/// Handles the clients' request lines: decodes each, does what it asks, and queues the reply.
///
/// A session's lines are handled in order, and only while its outbound buffer has room for the replies: a client that
/// floods requests without reading is slowed, not fed without bound.
final class RequestHandler {
    let state: BrokerState
    let publisher: Publisher
    let persistence: Persistence
    let manifestLoader: ManifestLoader
    /// Sessions whose `reload` waits for the manifest load with at least this generation.
    var reloadsWaiting: [(session: Session, id: RequestID?, generation: UInt64)] = []

    init(state: BrokerState, publisher: Publisher, persistence: Persistence, manifestLoader: ManifestLoader) {
        self.state = state
        self.publisher = publisher
        self.persistence = persistence
        self.manifestLoader = manifestLoader
    }

    /// Handles the session's pending request lines while it may (``Session/canHandleRequests``) and its turn's
    /// quota lasts; lines left over the quota wait for the next turn, lines left for want of room in the budget for
    /// the budget.
    func handlePendingLines(of session: Session) {
        guard !session.unhandled.isEmpty, !session.isHeldForShare else { return }
        // A user's requests take at most its share of the loop (root excepted): timed per batch.
        let sharedUID = session.peer.map(\.uid).flatMap { $0 == 0 || !state.sessions.loopShare.isLimited ? nil : $0 }
        var started: UInt64 = 0
        if let uid = sharedUID {
            started = monotonicNanoseconds()
            if let until = state.sessions.loopShare.heldUntil(uid, now: started) {
                state.sessions.holdForShare(session, until: until)
                return
            }
        }
        var handled = 0
        defer {
            session.unhandled.removeFirst(handled)
            if let uid = sharedUID, handled > 0 {
                let now = monotonicNanoseconds()
                state.sessions.loopShare.charge(uid, nanoseconds: now - started, now: now)
            }
        }
        let quota = state.configuration.limits.requestsPerTurn
        let byteQuota = DaemonLimits.replyBytesPerTurn
        for item in session.unhandled {
            guard session.canHandleRequests else {
                if !session.isClosing, !session.budget.allows(holding: session.outbound.byteCount) {
                    state.sessions.waitForBudget(session)
                }
                return
            }
            guard session.takeRequestSlot(turn: state.sessions.turn, limit: quota, byteLimit: byteQuota) else {
                state.sessions.deferToNextTurn(session)
                return
            }
            handled += 1
            switch item {
            case .line(let line):
                let before = session.outbound.byteCount
                handle(line, of: session)
                session.chargeReplyBytes(max(0, session.outbound.byteCount - before))
            case .overlong:
                reply(
                    to: session, id: nil,
                    ProtocolError(
                        .lineTooLong,
                        "message: line: longer than \(WireFormat.maximumLineLength) bytes; skipped to the next"
                            + " newline"))
            }
        }
    }

    /// Handles one request line; a blank line is a keep-alive.
    private func handle(_ line: [UInt8], of session: Session) {
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return }
        switch state.codec.decodeClientMessage(line) {
        case .success(let message): handle(message, from: session)
        case .failure(let failure): reply(to: session, id: failure.id, failure.error)
        }
    }

    private func handle(_ message: ClientMessage, from session: Session) {
        let id = message.id
        switch message.request {
        case .hello(let versions, let clientName, let restoreID, let relaunch):
            hello(
                session, id: id, versions: versions, clientName: clientName, restoreID: restoreID, relaunch: relaunch)
        case .subscribe(let filter, let includeRejected, let claims):
            subscribe(session, id: id, filter: filter, includeRejected: includeRejected, claims: claims)
        case .unsubscribe: unsubscribe(session, id: id)
        case .acknowledge(let sequence):
            // No reply: acknowledgements stream with the events. Only sessions with a restore id keep them.
            if session.acknowledge(sequence) { persistence.markDirty() }
        case .suspend: suspend(session, id: id)
        case .resume: resume(session, id: id)
        case .list(let filter, let includeRejected, let claims):
            guard !includeRejected || requireAdmin(session, id: id, for: "list: all") else { return }
            let snapshot = publisher.visibleSnapshot(
                for: session.principal, filter: filter, includeRejected: includeRejected, claims: claims)
            state.reply(to: session, .list(id: id, snapshot))
        case .reloadManifest: reload(session, id: id)
        case .status: state.reply(to: session, .status(id: id, status(for: session)))
        case .history(let query):
            let (entries, truncated) = state.history.entries(
                matching: query, for: session.principal, isAdmin: state.authorizer.isAdmin(session.principal),
                byteBudget: state.configuration.limits.clientOutputBytes)
            state.reply(to: session, .history(id: id, entries: entries, truncated: truncated))
        case .simulateConnect(let accessory): simulateConnect(session, id: id, accessory)
        case .simulateDisconnect(let connectionID): simulateDisconnect(session, id: id, connectionID)
        case .claim(let request): state.claims?.claim(session, id: id, request, handler: self)
        case .release(let request): state.claims?.release(session, id: id, request, handler: self)
        case .claims:
            if let list = state.claims?.list(for: session) { state.reply(to: session, .claims(id: id, list)) }
        }
    }

    /// Queues an `error` reply.
    func reply(to session: Session, id: RequestID?, _ error: ProtocolError) {
        state.reply(to: session, .error(id: id, error))
    }

    /// Refuses (with `permission-denied`) a client that is neither root nor an admin of the manifest.
    func requireAdmin(_ session: Session, id: RequestID?, for operation: String) -> Bool {
        if state.authorizer.isAdmin(session.principal) { return true }
        reply(
            to: session, id: id,
            ProtocolError(
                .permissionDenied,
                "\(operation): \(session.principal?.description ?? "this client"): only root and the manifest's "
                    + "admins may do this"))
        return false
    }
}
