import AccmonLogging
import AccmonManifest
import AccmonProtocol
import AccmonSys

extension ClaimDesk {
    /// What enforcing a granted claim came to.
    enum Enforcement {
        case enforced(ClaimInfo)
        case refused(ProtocolError)
    }

    // MARK: Enforcement

    /// Enforces a granted claim on its nodes (marking its USB ports first), then calls `completion` on the loop: with
    /// the claim as its holder sees it, or, when a node could not be held, with the error; the claim is then undone.
    func enforce(_ claim: Claim, then completion: @escaping (Enforcement) -> Void) {
        var operations: [(NodeOperation, simulated: Bool)] = []
        for item in claim.items {
            guard item.connection != nil else { continue }
            let simulated = item.simulated
            if !item.portPath.isEmpty { operations.append((.markPort(item.portPath, claimed: true), simulated)) }
            let holder = nodeHolder(claim, item)
            for path in item.last.deviceNodes { operations.append((.hold(path, holder), simulated)) }
            for path in item.last.deviceNodes { operations.append((.openers(path), simulated)) }
        }
        let batch = nodes.submit(operations)
        awaiting[batch] = { [self] result in
            guard let current = book.claims[claim.number] else {
                completion(.refused(ProtocolError(.noSuchClaim, "claim: \(claim.claimID): ended while being enforced")))
                return
            }
            let failures = result.results.compactMap { result -> String? in
                guard case .hold(let path, _) = result.operation, case .failed(let why) = result.step else { return nil }
                return "\(path): \(why)"
            }
            guard failures.isEmpty else {
                let world = world()
                logger.error(
                    .claimEnforcement, "claim not enforced, undone: \(failures.joined(separator: "; "))",
                    metadata(of: current))
                finish([.ended(book.end(claim.number)!, why: .released)], world: world, actor: nil, silently: true)
                completion(
                    .refused(
                        ProtocolError(
                            .enforcementFailed,
                            "claim: deviceNodes: could not enforce the claim: \(failures.joined(separator: "; "))")))
                return
            }
            for case .gone(let why) in result.results.map(\.step) {
                logger.notice(
                    .claimEnforcement, "a node went away while it was held (the device re-enumerates; the claim "
                        + "follows it): \(why)", metadata(of: current))
            }
            let world = world()
            let info = info(of: current, world, nodeResults: result.results)
            log(.claimGranted, "claim granted", claim: current)
            for accessory in info.accessories {
                state.recordHistory(
                    .claim, accessory, holder: current.holder.party, reason: current.reason.isEmpty ? nil : current.reason)
            }
            markChanged(current.connections)
            publishChanges()
            // Told once the claim is on disk: a crash after the holder heard of it keeps it.
            persistence.whenSaved { completion(.enforced(info)) }
        }
    }

    /// Whose the nodes of `item` are while `claim` holds it: the holder's; for a remote holder, the local user the
    /// entry maps it to (read and write, as the admin asked for it), or nobody but root.
    func nodeHolder(_ claim: Claim, _ item: ClaimedItem) -> NodeHolder {
        guard let remote = claim.holder.remoteUser else {
            return NodeHolder(uid: claim.holder.principal?.uid, gids: claim.holder.principal?.gids ?? [], grant: item.grant)
        }
        let policy = Self.policy(of: item.last, authorizer: state.authorizer)
        return NodeHolder(uid: policy.localUser(for: remote, accounts: state.authorizer.accounts), gids: [], grant: true)
    }

    /// Takes the node batches' results and runs what waited for them.
    func takeNodeResults() {
        for result in nodeResults.take() {
            if let waiting = awaiting.removeValue(forKey: result.number) {
                waiting(result)
            } else {
                logFailures(result)
            }
        }
    }

    /// Logs the operations of `result` that failed.
    func logFailures(_ result: NodeGuard.BatchResult) {
        for failure in result.results {
            if case .failed(let why) = failure.step {
                logger.warning(.claimEnforcement, "device node: \(why)", ["node.operation": "\(failure.operation)"])
            }
        }
    }

    /// Answers `session`'s release once the nodes it freed (batch `batch`) are as they were before the claim, or at
    /// once when it freed none: a releaser that exits when told, as `accmon claim` does, leaves the nodes open to the
    /// others, as `flock(1)` leaves the lock. The session's further requests wait for the answer.
    func answerRelease(_ session: Session, id: RequestID?, once batch: UInt64?) {
        guard let batch else {
            state.reply(to: session, .ok(id: id, connectionID: nil))
            return
        }
        session.awaitsClaim = true
        awaiting[batch] = { [self] result in
            logFailures(result)
            session.awaitsClaim = false
            if !session.isClosing { state.reply(to: session, .ok(id: id, connectionID: nil)) }
            resumeRequests?(session)
        }
    }

    // MARK: Applying what the book decided

    /// Acts on `effects`, then offers what became free to the waiters and enforces what they were granted; tells
    /// holders, waiters and subscribers. `actor` is who caused the effects (for the journal); `silently` keeps the
    /// holder from being told (a claim undone before its holder heard of it). Returns the number of the batch that
    /// gives the freed nodes back, if any.
    @discardableResult
    func finish(_ effects: [ClaimEffect], world: ClaimWorld, actor: Party?, silently: Bool = false) -> UInt64? {
        var freed: [(paths: [(String, Bool)], ports: [String], cut: Bool)] = []
        for effect in effects {
            switch effect {
            case .ended(let claim, let why):
                if !silently { tellEnd(claim, why) }
                log(ended: claim, why, actor: actor)
                markChanged(claim.connections)
                markWaitingChanged([])
                var paths: [(String, Bool)] = []
                var ports: [String] = []
                for item in claim.items {
                    if !item.portPath.isEmpty && !item.simulated { ports.append(item.portPath) }
                    guard item.connection != nil else { continue }
                    paths += item.last.deviceNodes.map { ($0, item.simulated) }
                }
                let cut: Bool
                switch why {
                case .broken, .holderGone, .expired: cut = true
                case .released, .lost: cut = false
                }
                freed.append((paths, ports, cut))
            case .returning(let number, let accessory):
                guard let claim = book.claims[number] else { continue }
                tell(claim.holder.session, ClaimNotice(
                    claimID: claim.claimID, kind: .returning, time: world.wallNow, accessory: accessory))
                logger.info(.claimGranted, "claimed accessory gone; the claim waits for it to come back",
                    metadata(of: claim).merging(AccmondKit.metadata(for: accessory)) { $1 })
                // The node is gone: its record is dropped (a node made again at the path is another inode).
                let simulated = claim.items.first { $0.last.connectionID == accessory.connectionID }?.simulated ?? true
                _ = nodes.submit(accessory.deviceNodes.map { (.release($0), simulated) })
            case .returned(let number, let accessory, _):
                guard let claim = book.claims[number] else { continue }
                markChanged([accessory.connectionID])
                enforce(claim) { [self] outcome in
                    guard let current = book.claims[number] else { return }
                    switch outcome {
                    case .enforced(let info):
                        tell(current.holder.session, ClaimNotice(
                            claimID: current.claimID, kind: .returned, time: wallClockSeconds(), claim: info,
                            accessory: accessory))
                    case .refused: break  // undone and logged by enforce
                    }
                }
            case .cancelled(let waiter, let why):
                tell(waiter.claimant.session, ClaimNotice(
                    claimID: waiter.claimID, kind: .cancelled, time: world.wallNow, reason: why))
                logger.notice(.claimReleased, "waiting claim cancelled: \(why)", metadata(of: waiter))
            case .waiterFollowed:
                break
            }
        }
        let granted = book.offer(world)
        let kept = Set(granted.flatMap { grant in
            grant.claim.items.flatMap { $0.connection == nil ? [] : $0.last.deviceNodes }
        })
        // A port stays marked while any claim has an accessory on it (held, or away for its return window): the
        // usb device and the serial port of one adapter are two accessories, which two claims may hold.
        let keptPorts = Set(book.claims.values.flatMap { $0.items.map(\.portPath) })
        var operations: [(NodeOperation, simulated: Bool)] = []
        for release in freed {
            if release.cut { operations += release.paths.map { (.cut($0.0), $0.1) } }
            operations += release.paths.filter { !kept.contains($0.0) }.map { (.release($0.0), $0.1) }
            operations += release.ports.filter { !keptPorts.contains($0) }.map { (.markPort($0, claimed: false), false) }
        }
        let releasing = operations.isEmpty ? nil : nodes.submit(operations)
        // Published once enforced (``enforce(_:then:)``), not twice.
        changed.subtract(granted.flatMap { $0.claim.connections })
        for (waiter, claim) in granted {
            enforce(claim) { [self] outcome in
                switch outcome {
                case .enforced(let info):
                    tell(waiter.claimant.session, ClaimNotice(
                        claimID: claim.claimID, kind: .granted, time: wallClockSeconds(), claim: info))
                case .refused(let error):
                    tell(waiter.claimant.session, ClaimNotice(
                        claimID: claim.claimID, kind: .cancelled, time: wallClockSeconds(), reason: error.message))
                }
            }
        }
        if !effects.isEmpty || !granted.isEmpty { persistence.markDirty() }
        publishChanges()
        return releasing
    }

    // MARK: Telling

    /// Queues a notice for a live session (a bus claimer's goes to the bus as a signal, ``BusFrontend``).
    func tell(_ session: UInt64?, _ notice: ClaimNotice) {
        guard let number = session, let session = state.sessions[number], !session.isClosing else { return }
        if session.busEndpoint != nil {
            state.bus?.claimNotice(notice, to: session)
            return
        }
        state.reply(to: session, .claimNotice(notice))
    }

    /// Ends claim `number` as its holder's release does; `done` runs once its nodes are as they were.
    func releaseOwn(_ number: UInt64, actor: Party, done: @escaping () -> Void) {
        guard let ended = book.end(number) else { return done() }
        let batch = finish([.ended(ended, why: .released)], world: world(), actor: actor)
        after(batch, done)
    }

    /// Breaks claim `number` as an admin's `release` with `force` does; `done` runs once its nodes are as they were.
    func breakClaim(_ number: UInt64, by actor: Party, reason: String, done: @escaping () -> Void) {
        guard let ended = book.end(number) else { return done() }
        let batch = finish([.ended(ended, why: .broken(by: actor, reason: reason))], world: world(), actor: actor)
        after(batch, done)
    }

    private func after(_ batch: UInt64?, _ done: @escaping () -> Void) {
        guard let batch else { return done() }
        awaiting[batch] = { [self] result in
            logFailures(result)
            done()
        }
    }

    /// Tells the holders of `numbers` that someone asked for what they hold.
    func tellHolders(_ numbers: [UInt64], of kind: ClaimNotice.Kind, by party: Party, reason: String) {
        let now = wallClockSeconds()
        for number in numbers {
            guard let claim = book.claims[number] else { continue }
            tell(claim.holder.session, ClaimNotice(
                claimID: claim.claimID, kind: kind, time: now, by: party, reason: reason.isEmpty ? nil : reason))
            for item in claim.items {
                state.recordHistory(
                    .contention, item.last, actor: party, holder: claim.holder.party, reason: reason.isEmpty ? nil : reason)
            }
            logger.notice(
                .claimContention, "claim contended by \(party)\(reason.isEmpty ? "" : ": \(reason)")",
                metadata(of: claim).merging(["claim.actor": party.description, "claim.reason": reason]) { $1 })
        }
    }

    /// Tells a holder how its claim ended (not when it released it itself).
    func tellEnd(_ claim: Claim, _ why: ClaimEndReason) {
        let now = wallClockSeconds()
        let notice: ClaimNotice
        switch why {
        case .released, .holderGone: return
        case .broken(let by, let reason):
            notice = ClaimNotice(claimID: claim.claimID, kind: .broken, time: now, by: by, reason: reason)
        case .lost(let accessory):
            notice = ClaimNotice(
                claimID: claim.claimID, kind: .lost, time: now,
                reason: "\(accessory.accessoryID) did not come back within its return window", accessory: accessory)
        case .expired:
            notice = ClaimNotice(claimID: claim.claimID, kind: .expired, time: now, reason: "maximum duration reached")
        }
        tell(claim.holder.session, notice)
    }

    /// The holders' connections whose `waiting` count changed.
    func markWaitingChanged(_ numbers: [UInt64]) {
        for number in numbers { markChanged(book.claims[number]?.connections ?? []) }
    }

    func markChanged(_ connections: [ConnectionID]) { changed.formUnion(connections) }

    /// Sends a `claim-update` for every changed connection to the subscribers that asked for claims and see it (or
    /// keeps it for a suspended one until it is live again).
    func publishChanges() {
        guard !changed.isEmpty else { return }
        defer { changed.removeAll() }
        let world = world()
        for connection in changed.sorted() {
            guard let accessory = world.accessory(connection), let verdict = state.authorizer.verdict(connection)
            else { continue }
            let update = ClaimUpdate(
                connectionID: connection, accessoryID: accessory.accessoryID,
                claim: book.holding[connection].flatMap { book.claims[$0] }.map { summary(of: $0, world) })
            state.bus?.claimChanged(connection, verdict: verdict, claim: update.claim)
            var line: [UInt8]?
            for session in state.sessions.all
            where session.subscription?.claims == true
                && session.receives(accessory, verdict: verdict, accounts: state.authorizer.accounts)
            {
                if session.isSuspended || session.outboundIsFull {
                    session.pendingClaimUpdates.insert(connection)
                    continue
                }
                let bytes = line ?? state.codec.encode(.claimUpdate(update))
                line = bytes
                session.queueOutput(bytes)
                state.sessions.queueFlush(session)
            }
        }
    }

    /// The claim updates a session missed while suspended: the current claim of each connection it missed one of.
    func flushPendingUpdates(of session: Session) {
        guard !session.pendingClaimUpdates.isEmpty else { return }
        let world = world()
        for connection in session.pendingClaimUpdates.sorted() {
            guard let accessory = world.accessory(connection) else { continue }
            let update = ClaimUpdate(
                connectionID: connection, accessoryID: accessory.accessoryID,
                claim: book.holding[connection].flatMap { book.claims[$0] }.map { summary(of: $0, world) })
            session.queueOutput(state.codec.encode(.claimUpdate(update)))
        }
        session.pendingClaimUpdates.removeAll()
        state.sessions.queueFlush(session)
    }

    // MARK: The journal

    func metadata(of claim: Claim) -> [String: String] {
        [
            "claim.id": claim.claimID, "claim.holder": claim.holder.party.description,
            "accessory.id": claim.items.map(\.accessoryID).joined(separator: ","),
            "connection.id": claim.connections.map(\.description).joined(separator: ","), "claim.reason": claim.reason,
        ]
    }

    func metadata(of waiter: Waiter) -> [String: String] {
        ["claim.id": waiter.claimID, "claim.actor": waiter.claimant.party.description, "claim.reason": waiter.reason]
    }

    func log(_ kind: LogMessageID, _ message: String, claim: Claim) {
        logger.notice(kind, "\(message): \(claim.claimID) by \(claim.holder.party)", metadata(of: claim))
    }

    func log(_ kind: LogMessageID, _ message: String, waiter: Waiter, blockers: [UInt64]) {
        logger.notice(
            kind, "\(message): \(waiter.claimID) by \(waiter.claimant.party)",
            metadata(of: waiter).merging(["claim.blockers": blockers.map { "c-\($0)" }.joined(separator: ",")]) { $1 })
    }

    func log(ended claim: Claim, _ why: ClaimEndReason, actor: Party?) {
        for item in claim.items {
            switch why {
            case .broken(let by, let reason):
                state.recordHistory(.break, item.last, actor: by, holder: claim.holder.party, reason: reason)
            case .released:
                state.recordHistory(.release, item.last, actor: actor, holder: claim.holder.party, reason: "released")
            case .lost: state.recordHistory(.release, item.last, holder: claim.holder.party, reason: "did not come back")
            case .expired:
                state.recordHistory(.release, item.last, holder: claim.holder.party, reason: "maximum duration reached")
            case .holderGone: state.recordHistory(.release, item.last, holder: claim.holder.party, reason: "holder gone")
            }
        }
        var metadata = metadata(of: claim)
        if let actor { metadata["claim.actor"] = actor.description }
        switch why {
        case .released:
            logger.notice(.claimReleased, "claim released: \(claim.claimID) of \(claim.holder.party)", metadata)
        case .broken(let by, let reason):
            metadata["claim.actor"] = by.description
            metadata["claim.break.reason"] = reason
            logger.notice(
                .claimBroken,
                "claim broken by \(by): \(claim.claimID) of \(claim.holder.party)\(reason.isEmpty ? "" : ": \(reason)")",
                metadata)
        case .lost(let accessory):
            logger.notice(
                .claimReleased, "claim ended: \(accessory.accessoryID) did not come back: \(claim.claimID)", metadata)
        case .expired:
            logger.notice(.claimReleased, "claim ended at its maximum duration: \(claim.claimID)", metadata)
        case .holderGone:
            logger.notice(.claimReleased, "claim ended, its holder gone: \(claim.claimID) of \(claim.holder.party)", metadata)
        }
    }
}
