import AccmonLogging
import AccmonManifest
import AccmonProtocol
import AccmonSys

/// The requests about a client's own session: `hello` (with restore ids), `subscribe`, `unsubscribe`, `suspend`,
/// `resume`, and `status`.
extension RequestHandler {
    func hello(
        _ session: Session, id: RequestID?, versions: [Int], clientName: String, restoreID: String?, relaunch: String?
    ) {
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
        var template: LaunchTemplate?
        if let relaunch {
            guard let registered = relaunchTemplate(relaunch, for: session, id: id, restoreID: restoreID) else { return }
            template = registered
        }
        var restoreKey: RestoreKey?
        if let restoreID {
            guard !restoreID.isEmpty else {
                reply(to: session, id: id, ProtocolError(.invalidField, "hello: restoreID: must not be empty"))
                return
            }
            guard restoreID.utf8.count <= DaemonLimits.restoreIDBytes else {
                reply(
                    to: session, id: id,
                    ProtocolError(
                        .invalidField,
                        "hello: restoreID: \(restoreID.utf8.count) bytes, longer than \(DaemonLimits.restoreIDBytes)"))
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
            // Its previous connection hung up, and this turn has not read that yet (the loop serves the ready
            // connections in the order the kernel lists them): closed now, so that this hello reclaims it.
            if let holder = state.sessions.liveHolder(of: key), holder.unhandled.isEmpty,
                holder.socket?.peerHasClosed == true
            {
                state.sessions.close(holder, reason: "client closed the connection")
            }
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
                state.claims?.sessionClosed(leaving)
                persistence.preserveIfRestorable(leaving)
                leaving.releaseRestoreKey()
            }
            restoreKey = key
        }
        session.greet(version: version, clientName: clientName, restoreKey: restoreKey, relaunch: template)
        state.logger.debug(.clientSession, "client said hello", session.metadata)
        if let template {
            state.logger.info(
                .relaunch, "relaunch registered: \(template.instance(UInt64(restoreKey!.uid))) is started when an event "
                    + "waits for this session while its client is away",
                session.metadata.merging(["launch.unit": template.name]) { $1 })
        }
        let kept = restoreKey.flatMap { state.preserved.claim($0) }
        if let restoreKey {
            state.launcher?.reclaimed(restoreKey)
            if kept != nil { state.claims?.sessionRestored(session, key: restoreKey) }
        }
        state.reply(
            to: session,
            .hello(
                id: id, version: version, daemonVersion: AccmonVersion.current, sessionID: session.sessionID,
                restored: kept != nil))
        if let kept { handBack(kept, to: session) }
    }

    /// The template a `hello` registers for relaunch, checked: it needs a restore id, the form accmond starts, and
    /// the manifest's leave for this user; `nil` after replying with the error.
    private func relaunchTemplate(_ relaunch: String, for session: Session, id: RequestID?, restoreID: String?)
        -> LaunchTemplate?
    {
        guard restoreID != nil else {
            reply(
                to: session, id: id,
                ProtocolError(
                    .invalidField, "hello: relaunch: needs a restoreID (a unit is relaunched for a preserved session)"))
            return nil
        }
        guard let template = LaunchTemplate(relaunch) else {
            let problem = LaunchTemplate.problem(with: relaunch) ?? ""
            reply(to: session, id: id, ProtocolError(.invalidField, "hello: relaunch: '\(relaunch)' is refused: \(problem)"))
            return nil
        }
        guard let principal = session.principal,
            state.authorizer.manifest.mayRegisterRelaunch(
                template, uid: principal.uid, gids: principal.gids, accounts: state.authorizer.accounts)
        else {
            reply(
                to: session, id: id,
                ProtocolError(
                    .permissionDenied,
                    "hello: relaunch: \(session.principal?.description ?? "this client") may not register "
                        + "'\(relaunch)': the manifest's relaunch list does not give it to this user"))
            return nil
        }
        return template
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

    func subscribe(_ session: Session, id: RequestID?, filter: AccessoryFilter, includeRejected: Bool, claims: Bool) {
        guard !includeRejected || requireAdmin(session, id: id, for: "subscribe: all") else { return }
        guard session.subscription == nil else {
            reply(to: session, id: id, ProtocolError(.alreadySubscribed, "subscribe: session: already subscribed"))
            return
        }
        // The loop owns both the registry and the session: the snapshot and the start of the stream are one step,
        // so nothing is missed or repeated between them.
        let snapshot = publisher.visibleSnapshot(
            for: session.principal, filter: filter, includeRejected: includeRejected, claims: claims)
        session.subscribe(
            Subscription(filter: filter, includesRejected: includeRejected, claims: claims),
            memory: { () -> SessionMemory in
                var memory = SessionMemory(filter: filter, snapshot: snapshot)
                memory.claims = claims
                return memory
            }())
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
        if !session.isSuspended { state.claims?.flushPendingUpdates(of: session) }
        state.logger.debug(
            .clientSession, "client resumed", session.metadata.merging(["queue": String(session.queue.count)]) { $1 })
        state.reply(to: session, .ok(id: id, connectionID: nil))
    }

    /// The daemon's state as `session` may see it. An admin sees everything. Anyone else sees their own sessions (at
    /// most ``DaemonLimits/statusSessions`` of them, the rest counted), counts over what they may see, and nothing of
    /// the manifest: its text (entry names, serial patterns) is what authenticates accessories.
    func status(for session: Session) -> DaemonStatus {
        let now = monotonicNanoseconds()
        let admin = state.authorizer.isAdmin(session.principal)
        let uid = session.principal?.uid
        let live: [Session]
        let kept: [(key: RestoreKey, value: PreservedSession)]
        if admin {
            live = state.sessions.all.sorted { $0.number < $1.number }
            kept = state.preserved.sessions.sorted { $0.value.since < $1.value.since }
        } else {
            live = uid.map { state.sessions.sessions(of: $0) } ?? []
            kept = state.preserved.sessions.filter { $0.key.uid == uid }.sorted { $0.value.since < $1.value.since }
        }
        let listed = admin ? Int.max : DaemonLimits.statusSessions
        var clients = live.prefix(listed).map { $0.status(now: now) }
        clients += kept.prefix(max(0, listed - clients.count)).map { key, kept in
            SessionStatus(
                sessionID: "restore:\(key.restoreID)", clientName: kept.clientName, pid: 0, uid: key.uid,
                state: .preserved, suspendedBecause: "", subscribed: true, queuedEvents: kept.memory.replay.count,
                outboundBytes: 0, idleSeconds: Double(now &- kept.since) / 1e9, transport: kept.bus == nil ? .socket : .bus)
        }
        var status = DaemonStatus(
            daemonVersion: AccmonVersion.current, protocolVersion: session.protocolVersion,
            uptimeSeconds: Double(now - state.startedAt) / 1e9,
            connectedAccessories: admin
                ? state.registry.count
                : publisher.visibleSnapshot(for: session.principal, filter: .all, includeRejected: false)
                    .accessories.count,
            sessions: admin ? state.sessions.count : live.count, sequence: state.registry.sequence,
            simulate: state.simulated != nil, clients: clients, manifest: admin ? state.authorizer.status : nil)
        if let claims = state.claims, !claims.isIdle {
            let list = claims.list(for: session)
            status.claims = list.claims.count
            status.claimWaiters = list.waiters.count
        } else {
            status.claims = 0
            status.claimWaiters = 0
        }
        let unlisted = live.count + kept.count - clients.count
        status.unlistedClients = unlisted > 0 ? unlisted : nil
        return status
    }
}
