import AccmonLogging
import AccmonProtocol
import AccmonSys
import AccmonSystemd

/// Bus subscriptions (`Manager.Subscribe`): sessions of the loop's table whose events leave as `Events` signals to
/// their peer (docs/DBUS.md, "Subscriptions"). Queued, coalesced, restored and bounded as the socket's sessions:
/// the same ``Session``, ``SessionMemory`` and ``PreservedSessions``, one namespace of restore ids per user.
extension BusFrontend {
    /// `Subscribe(a{sv}) → o`: the subscription object's path, then on it a `Snapshot` signal (what the subscriber
    /// knows from now on, or with a restore id kept for it, what it knew), then `Events`.
    func subscribe(_ call: BusCall, _ peer: BusPeer) {
        let options: BusSubscribeOptions
        do {
            options = try BusSubscribeOptions(call.arguments[0])
        } catch {
            fail(call, error)
            return
        }
        if let refusal = limitReached(by: peer.credentials.uid) {
            logger.info(.busPeer, "bus: Subscribe refused: \(refusal)", ["bus.peer": peer.name])
            fail(call, BusError(.limitReached, "Subscribe: \(refusal)"))
            return
        }
        if options.suspendWhileInactive, let refusal = loginRefusal("Subscribe", "suspend-while-inactive") {
            fail(call, refusal)
            return
        }
        var key: RestoreKey?
        if let restoreID = options.restoreID {
            let wanted = RestoreKey(uid: peer.credentials.uid, restoreID: restoreID)
            if let holder = state.sessions.liveHolder(of: wanted) {
                let holderKind = holder.busEndpoint == nil ? "a socket connection" : "a bus subscription"
                fail(
                    call,
                    BusError(
                        .restoreIDInUse,
                        "Subscribe: restore-id: '\(restoreID)' is in use by \(holderKind) of this user (\(holder.sessionID))"))
                return
            }
            // Its previous session ended in this loop turn and would be kept only at the turn's end: kept now.
            if let leaving = state.sessions.closingHolder(of: wanted) {
                state.claims?.sessionClosed(leaving)
                persistence.preserveIfRestorable(leaving)
                leaving.releaseRestoreKey()
            }
            key = wanted
        }
        guard let session = makeSession(for: peer, path: Self.newSubscriptionPath(), key: key, name: options.clientName)
        else {
            fail(call, BusError(.failed, "Subscribe: accmond is not on the bus"))
            return
        }
        reply(call, [.objectPath(session.busEndpoint!.objectPath)])
        if options.suspendWhileInactive { followLogin(of: peer, for: session) }
        if let key, let kept = state.preserved.claim(key) {
            handBack(kept, to: session, key: key)
            return
        }
        if let key { state.launcher?.reclaimed(key) }
        let snapshot = publisher.visibleSnapshot(for: peer.principal, filter: options.filter, includeRejected: false)
        session.subscribe(
            Subscription(filter: options.filter, includesRejected: false),
            memory: SessionMemory(filter: options.filter, snapshot: snapshot))
        if session.memory != nil { persistence.markDirty() }
        session.busEndpoint!.acknowledged = snapshot.sequence
        sendSnapshot(session, sequence: snapshot.sequence, accessories: snapshot.accessories, restored: false)
        logger.debug(.clientSession, "bus peer subscribed", session.metadata)
    }

    /// Why user `uid` may not have one more session (socket connections and bus subscriptions count together), or
    /// `nil`.
    private func limitReached(by uid: UInt32) -> String? {
        let limits = state.configuration.limits
        if state.sessions.count >= limits.connections {
            return "\(limits.connections) sessions are open (--max-connections)"
        }
        if uid != 0, state.sessions.count(of: uid) >= limits.connectionsPerUser {
            return "uid \(uid) has \(limits.connectionsPerUser) sessions open, socket connections and bus subscriptions"
                + " together (--max-connections-per-user); close one first"
        }
        return nil
    }

    /// A new subscription object's path: a random element, so that a path is never used twice, across restarts too.
    static func newSubscriptionPath() -> String {
        var generator = SystemRandomNumberGenerator()
        let number = generator.next() as UInt64
        let hex = String(number, radix: 16)
        return "\(BusAPI.subscriptionsPath)/\(String(repeating: "0", count: 16 - hex.count))\(hex)"
    }

    /// A session for a subscription of `peer` at `path`, in the loop's table; `nil` while accmond is off the bus.
    private func makeSession(for peer: BusPeer, path: String, key: RestoreKey?, name: String?) -> Session? {
        guard let busID else { return nil }
        let credentials = peer.credentials
        let session = Session(
            number: state.sessions.takeNumber(),
            transport: .bus(BusEndpoint(peer: peer.name, busID: busID, objectPath: path)),
            peer: PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: peer.principal.gids.first ?? 0),
            principal: peer.principal, outboundLimit: state.configuration.limits.busUnacknowledgedBytes,
            budget: subscriptionBudget, now: monotonicNanoseconds())
        session.greet(
            version: WireFormat.supportedVersions.upperBound, clientName: name ?? "bus \(peer.name)", restoreKey: key)
        state.sessions.add(session)
        subscriptions[path] = session
        peer.subscriptions.insert(path)
        return session
    }

    /// Hands a preserved session to a subscription: `Snapshot` of what it knew as of its last acknowledgement
    /// (`restored` true), then the events it missed, coalesced, as `Events`; live events follow.
    private func handBack(_ kept: PreservedSession, to session: Session, key: RestoreKey) {
        session.handBack(kept)
        state.launcher?.reclaimed(key)
        state.claims?.sessionRestored(session, key: key)
        let restoreState = kept.memory.restoreState
        session.busEndpoint!.acknowledged = restoreState.acknowledged
        sendSnapshot(session, sequence: restoreState.acknowledged, accessories: restoreState.accessories, restored: true)
        for entry in kept.memory.replay.contents { session.queueEvent(entry.event, line: entry.payload) }
        state.sessions.queueFlush(session)
        persistence.markDirty()
        logger.info(
            .preservedSession, "bus subscription restored",
            session.metadata.merging(["restore.id": key.restoreID, "replay": String(kept.memory.replay.count)]) { $1 })
    }

    private func sendSnapshot(_ session: Session, sequence: UInt64, accessories: [Accessory], restored: Bool) {
        guard let endpoint = session.busEndpoint else { return }
        signal(
            [endpoint.peer], path: endpoint.objectPath, interface: BusAPI.subscriptionInterface, member: "Snapshot",
            BusBody { (message: BusMessage) throws(SystemdBusError) in
                try message.append(sequence, type: "t")
                try message.container("a", "a{sv}") { () throws(SystemdBusError) in
                    for accessory in accessories {
                        try BusAccessoryProperties.write(accessory, claim: nil, withClaim: false, into: message)
                    }
                }
                try message.append(.boolean(restored))
            })
        endpoint.announcedState = Self.stateName(of: session)
    }

    /// A peer is still on the bus accmond is back on (after a restart, or a lost connection): its subscriptions with
    /// a restore id come back at their paths, without a new `Subscribe`.
    func peerPresent(_ name: String, _ credentials: BusCredentials) {
        guard let busID else { return }
        if let peer = peers[name] ?? (claimHolders(on: busID).contains(name) ? BusPeer(name: name, credentials: credentials) : nil) {
            peers[name] = peer
            takeUpClaims(of: peer)
        }
        let returning = state.preserved.sessions.filter {
            $0.value.bus?.peer == name && $0.value.bus?.busID == busID && $0.key.uid == credentials.uid
        }
        guard !returning.isEmpty else { return }
        let peer = peers[name] ?? BusPeer(name: name, credentials: credentials)
        peers[name] = peer
        for (key, preserved) in returning.sorted(by: { $0.value.since < $1.value.since }) {
            guard state.sessions.liveHolder(of: key) == nil, let path = preserved.bus?.objectPath,
                subscriptions[path] == nil, let kept = state.preserved.claim(key),
                let session = makeSession(for: peer, path: path, key: key, name: kept.clientName)
            else { continue }
            handBack(kept, to: session, key: key)
        }
    }

    /// `Ack`, `Suspend`, `Resume` and `Close` on a subscription object (its peer's own: others never find it).
    func subscriptionCall(_ call: BusCall, _ member: String, _ session: Session) {
        switch member {
        case "Ack":
            guard case .uint64(let sequence) = call.arguments[0] else { return }
            if session.acknowledgeBusEvents(through: sequence, now: monotonicNanoseconds()) {
                state.sessions.queueFlush(session)
            }
            if session.memory != nil { persistence.markDirty() }
        case "Suspend":
            session.suspend()
            state.sessions.queueFlush(session)
        case "Resume":
            session.resume()
            state.sessions.queueFlush(session)
        default:
            if session.unsubscribe() { persistence.markDirty() }
            state.sessions.close(session, reason: "subscription closed by its subscriber")
        }
        reply(call)
    }

    /// The subscription object's properties, in their declared order.
    func subscriptionProperties(_ session: Session) -> [(String, BusValue)] {
        [
            ("RestoreID", .string(session.restoreKey?.restoreID ?? "")),
            ("Filter", BusSubscribeOptions.properties(of: session.subscription?.filter ?? .all)),
            ("State", .string(Self.stateName(of: session))),
            ("QueuedEvents", .uint32(UInt32(clamping: session.queue.count))),
            ("Acknowledged", .uint64(session.busEndpoint?.acknowledged ?? 0)),
        ]
    }

    static func stateName(of session: Session) -> String { session.isSuspended ? "suspended" : "live" }

    /// The end of a loop turn for a subscription with output: what its queue lets go now joins its buffer, the events
    /// not posted yet leave as one `Events` signal, and a change of its state is told (`PropertiesChanged`).
    func flush(_ session: Session) {
        guard let endpoint = session.busEndpoint, !session.isClosing else { return }
        if session.refillFromQueue() { logger.debug(.clientSession, "bus subscriber caught up", session.metadata) }
        let events = session.takeUnpostedBusEvents()
        if !events.isEmpty {
            postEvents(events, to: BusSignalTarget(destination: endpoint.peer, path: endpoint.objectPath))
        }
        let now = Self.stateName(of: session)
        if now != endpoint.announcedState {
            endpoint.announcedState = now
            signal(
                [endpoint.peer], path: endpoint.objectPath, interface: StandardBusInterfaces.properties.name,
                member: "PropertiesChanged",
                BusBody(values: [.string(BusAPI.subscriptionInterface), .vardict([("State", .string(now))]), .strings([])]))
        }
    }

    /// A subscription's session was removed from the loop's table.
    func subscriptionRemoved(_ session: Session) {
        guard let endpoint = session.busEndpoint else { return }
        subscriptions[endpoint.objectPath] = nil
        peers[endpoint.peer]?.subscriptions.remove(endpoint.objectPath)
    }
}
