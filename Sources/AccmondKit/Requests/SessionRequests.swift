import AccmonLogging
import AccmonProtocol
import AccmonSys

/// The requests about a client's own session: `hello` (with restore ids), `subscribe`, `unsubscribe`, `suspend`,
/// `resume`, and `status`.
extension RequestHandler {
    func hello(_ session: Session, id: RequestID?, versions: [Int], clientName: String, restoreID: String?) {
        guard !session.greeted else {
            reply(to: session, id: id, ProtocolError(.alreadyGreeted, "hello: session: already greeted"))
            return
        }
        guard let version = WireFormat.negotiate(clientVersions: versions) else {
            let range = WireFormat.supportedVersions
            reply(
                to: session, id: id,
                ProtocolError(
                    .unsupportedVersion,
                    "hello: versions: none of \(versions) is spoken here (this daemon speaks"
                        + " \(range.lowerBound) to \(range.upperBound))"))
            return
        }
        var restoreKey: RestoreKey?
        if let restoreID {
            guard !restoreID.isEmpty else {
                reply(to: session, id: id, ProtocolError(.invalidField, "hello: restoreID: must not be empty"))
                return
            }
            guard let uid = session.peer?.uid else {
                reply(
                    to: session, id: id,
                    ProtocolError(
                        .invalidField, "hello: restoreID: the daemon could not read this client's credentials"))
                return
            }
            let key = RestoreKey(uid: uid, restoreID: restoreID)
            guard state.sessions.liveHolder(of: key) == nil else {
                reply(
                    to: session, id: id,
                    ProtocolError(
                        .restoreIDInUse, "hello: restoreID: '\(restoreID)' is in use by another connection of this user"
                    ))
                return
            }
            // Its previous connection hung up in this loop turn and would be kept only at the turn's end: kept now,
            // so that this hello reclaims it.
            if let leaving = state.sessions.closingHolder(of: key) {
                persistence.preserveIfRestorable(leaving)
                leaving.releaseRestoreKey()
            }
            restoreKey = key
        }
        session.greet(version: version, clientName: clientName, restoreKey: restoreKey)
        state.logger.debug(.clientSession, "client said hello", session.metadata)
        let kept = restoreKey.flatMap { state.preserved.claim($0) }
        state.reply(
            to: session,
            .hello(
                id: id, version: version, daemonVersion: AccmonVersion.current, sessionID: session.sessionID,
                restored: kept != nil))
        if let kept { handBack(kept, to: session) }
    }

    /// Hands a preserved session to its returning client: the state as of its last acknowledgement, the events
    /// since (coalesced), then the `restored` marker; live events follow.
    private func handBack(_ kept: PreservedSession, to session: Session) {
        session.handBack(kept)
        state.reply(to: session, .restore(kept.memory.restoreState))
        for entry in kept.memory.replay.contents { session.queueOutput(entry.payload) }
        state.reply(to: session, .restored(sequence: state.registry.sequence))
        persistence.markDirty()
        state.logger.info(
            .preservedSession, "session restored",
            session.metadata.merging([
                "restore.id": session.restoreKey?.restoreID ?? "", "replay": String(kept.memory.replay.count),
            ]) { $1 })
    }

    func subscribe(_ session: Session, id: RequestID?, filter: AccessoryFilter, includeRejected: Bool) {
        guard !includeRejected || requireAdmin(session, id: id, for: "subscribe: all") else { return }
        guard session.subscription == nil else {
            reply(to: session, id: id, ProtocolError(.alreadySubscribed, "subscribe: session: already subscribed"))
            return
        }
        // The loop owns both the registry and the session: the snapshot and the start of the stream are one step,
        // so nothing is missed or repeated between them.
        let snapshot = publisher.visibleSnapshot(
            for: session.principal, filter: filter, includeRejected: includeRejected)
        session.subscribe(
            Subscription(filter: filter, includesRejected: includeRejected),
            memory: SessionMemory(filter: filter, snapshot: snapshot))
        if session.memory != nil { persistence.markDirty() }
        state.reply(to: session, .snapshot(id: id, snapshot))
    }

    func unsubscribe(_ session: Session, id: RequestID?) {
        guard session.subscription != nil else {
            reply(to: session, id: id, ProtocolError(.notSubscribed, "unsubscribe: session: not subscribed"))
            return
        }
        if session.unsubscribe() { persistence.markDirty() }
        state.reply(to: session, .ok(id: id, connectionID: nil))
    }

    func suspend(_ session: Session, id: RequestID?) {
        guard session.subscription != nil else {
            reply(to: session, id: id, ProtocolError(.notSubscribed, "suspend: session: not subscribed"))
            return
        }
        session.suspend()
        state.logger.debug(.clientSession, "client suspended", session.metadata)
        state.reply(to: session, .ok(id: id, connectionID: nil))
    }

    func resume(_ session: Session, id: RequestID?) {
        guard session.subscription != nil else {
            reply(to: session, id: id, ProtocolError(.notSubscribed, "resume: session: not subscribed"))
            return
        }
        // The reply goes first; the queued events follow as the socket takes them.
        session.resume()
        state.logger.debug(
            .clientSession, "client resumed", session.metadata.merging(["queue": String(session.queue.count)]) { $1 })
        state.reply(to: session, .ok(id: id, connectionID: nil))
    }

    func status(for session: Session) -> DaemonStatus {
        let now = monotonicNanoseconds()
        // Other users' sessions are for admins: an ordinary client sees its own user's.
        let admin = state.authorizer.isAdmin(session.principal)
        let uid = session.principal?.uid
        let live = state.sessions.all.filter { admin || $0.principal?.uid == uid }.sorted { $0.number < $1.number }
        let kept = state.preserved.sessions.filter { admin || $0.key.uid == uid }
            .sorted { $0.value.since < $1.value.since }
        return DaemonStatus(
            daemonVersion: AccmonVersion.current, protocolVersion: session.protocolVersion,
            uptimeSeconds: Double(now - state.startedAt) / 1e9,
            connectedAccessories: state.registry.count, sessions: state.sessions.count,
            sequence: state.registry.sequence, simulate: state.simulated != nil,
            clients: live.map { $0.status(now: now) }
                + kept.map { key, kept in
                    SessionStatus(
                        sessionID: "restore:\(key.restoreID)", clientName: kept.clientName, pid: 0, uid: key.uid,
                        state: .preserved, suspendedBecause: "", subscribed: true,
                        queuedEvents: kept.memory.replay.count, outboundBytes: 0,
                        idleSeconds: Double(now &- kept.since) / 1e9)
                },
            manifest: state.authorizer.status)
    }
}
