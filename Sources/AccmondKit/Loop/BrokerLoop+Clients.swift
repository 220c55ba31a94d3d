import AccmonLogging
import AccmonProtocol
import AccmonSys

/// The clients' sockets: accepting, reading request bytes, and writing what the sessions queued.
extension BrokerLoop {
    /// Accepts pending connections, at most ``acceptsPerTurn`` (a flood of connections must not starve the clients
    /// already served; the rest wait in the backlog for the next turn); refuses (with `too-many-connections`) those
    /// over a connection limit. A user over its connection rate stops the accepting until it is back within it.
    func acceptClients() {
        guard let listener, !listenerPaused else { return }
        for _ in 0..<Self.acceptsPerTurn {
            let descriptor: FileDescriptor
            do {
                guard let accepted = try UnixSocket.accept(listener) else { return }
                descriptor = accepted
            } catch  where error == .processOutOfDescriptors || error == .systemOutOfDescriptors {
                refuseForWantOfDescriptors(listener, error)
                return
            } catch {
                logThrottled("accept", .transportFailure, "accept: \(state.configuration.socketPath): \(error)")
                return
            }
            let peer = try? UnixSocket.peerCredentials(descriptor)  // try?: without them the client is nobody
            let wait = peer.flatMap {
                $0.uid == 0 ? nil : connectionRate.connected($0.uid, now: monotonicNanoseconds())  // root excepted
            }
            defer {
                if let wait { pauseListener(for: wait, resumesOnFree: false) }
            }
            if let refusal = connectionLimitReached(by: peer) {
                refuse(descriptor, refusal)
                if wait != nil { return }
                continue
            }
            let number = state.sessions.takeNumber()
            let session = Session(
                number: number, descriptor: descriptor, peer: peer,
                outboundLimit: state.configuration.limits.clientOutputBytes, budget: state.sessions.budget,
                now: monotonicNanoseconds())
            do {
                try poller.add(descriptor, interest: .readable, token: number)
            } catch {
                logger.warning(.transportFailure, "epoll_ctl: session \(session.sessionID): \(error)")
                descriptor.close()
                continue
            }
            state.sessions.add(session)
            // Its user's name, looked up off the loop before a claim of it names its holder.
            if let uid = peer?.uid { state.claims?.names.warm(uid) }
            logger.debug(.clientConnected, "client connected", session.metadata)
            if wait != nil { return }
        }
    }

    /// Why a client of `peer` may not connect now, or `nil`.
    private func connectionLimitReached(by peer: PeerCredentials?) -> String? {
        let limits = state.configuration.limits
        if state.sessions.count >= limits.connections {
            return "\(limits.connections) client connections are open (--max-connections)"
        }
        if let uid = peer?.uid, uid != 0, state.sessions.count(of: uid) >= limits.connectionsPerUser {
            return
                "uid \(uid) has \(limits.connectionsPerUser) connections open (--max-connections-per-user); close one"
                + " first"
        }
        return nil
    }

    /// Tells a client why it is refused, then closes its connection.
    private func refuse(_ descriptor: FileDescriptor, _ reason: String) {
        if refusalLines[reason] == nil {
            if refusalLines.count >= 64 { refusalLines.removeAll() }  // reasons name uids: keep a few
            let error = ProtocolError(.tooManyConnections, "connect: accmond: \(reason)")
            refusalLines[reason] = state.codec.encode(.error(id: nil, error))
        }
        descriptor.sendOnce(refusalLines[reason] ?? [])
        descriptor.close()
        logThrottled("refused", .limitReached, "client refused: \(reason)")
    }

    /// `accept` failed for want of descriptors: the spare one kept for this is closed to accept the waiting
    /// client, which is told so and closed, then reopened. Without it (another open took it) the listener is not
    /// watched until a session closes or a second passes: a listener that stays readable must not make the loop spin.
    private func refuseForWantOfDescriptors(_ listener: FileDescriptor, _ error: Errno) {
        if let spare = spareDescriptor {
            spare.close()
            spareDescriptor = nil
            if let accepted = try? UnixSocket.accept(listener) {  // try?: none waiting any more is fine
                refuse(accepted, "out of file descriptors (\(error))")
            }
            spareDescriptor = try? FileDescriptor.openReadOnly("/dev/null")  // try?: nil pauses the listener below
            if spareDescriptor != nil { return }
        }
        pauseListener()
        logThrottled(
            "accept", .transportFailure,
            "accept: \(state.configuration.socketPath): \(error); not accepting"
                + " until a client leaves")
    }

    /// Logs at most one line per `kind` every ten seconds, with how many occurred since the last one.
    func logThrottled(_ kind: String, _ id: LogMessageID, _ message: String) {
        guard let count = logThrottle.occurrence(of: kind) else { return }
        logger.warning(id, count > 1 ? "\(message) (\(count) times since the last such line)" : message)
    }

    func serve(_ readiness: Readiness) {
        guard let session = state.sessions[readiness.token], !session.isClosing else { return }
        if readiness.writable { state.sessions.queueFlush(session) }
        if readiness.readable || readiness.hangup { read(session, hangup: readiness.hangup) }
    }

    private func read(_ session: Session, hangup: Bool) {
        guard let socket = session.socket else { return }
        let result = readBuffer.withUnsafeMutableBytes { buffer in
            Result { () throws(Errno) -> Int in try socket.receive(into: buffer) }
        }
        let count: Int
        do throws(Errno) {
            count = try result.get()
        } catch {
            if error != .wouldBlock { state.sessions.close(session, reason: "read: \(error)") }
            return
        }
        if count == 0 {
            // A half-close (shutdown of the client's writing side) still wants its replies and, when subscribed,
            // the events; a full close shows as a hang-up, or as a write error later.
            if hangup || (session.subscription == nil && session.outbound.isEmpty && session.unhandled.isEmpty) {
                state.sessions.close(session, reason: "client closed the connection")
            } else {
                session.closeInput()
                state.sessions.queueFlush(session)
            }
            return
        }
        session.noteInput(now: monotonicNanoseconds())
        session.framer.append(readBuffer[0..<count], to: &session.unhandled)
        requests.handlePendingLines(of: session)
        state.sessions.queueFlush(session)
    }

    /// Writes what the socket takes, then refills the outbound buffer from the session's queue (when it is not
    /// suspended by request) and handles waiting requests, while that makes progress.
    func flush(_ session: Session) {
        guard session.socket != nil else {
            state.bus?.flush(session)
            return
        }
        while true {
            let before = session.outbound.byteCount
            do throws(Errno) {
                try session.flushOutput(now: monotonicNanoseconds())
            } catch {
                state.sessions.close(session, reason: "write: \(error)")
                return
            }
            if session.refillFromQueue() {
                logger.debug(.clientSession, "client caught up: live again", session.metadata)
            }
            if !session.pendingClaimUpdates.isEmpty, !session.isSuspended, !session.outboundIsFull {
                state.claims?.flushPendingUpdates(of: session)
            }
            requests.handlePendingLines(of: session)
            guard !session.isClosing else { return }
            if session.isFinished {
                state.sessions.close(session, reason: "client closed its side after its last request")
                return
            }
            let stalled = session.outbound.byteCount == 0 || session.outbound.byteCount >= before
            if stalled { break }
        }
        updateInterest(session)
    }

    /// Watches for writability while output waits, and for readability while there is room for replies.
    private func updateInterest(_ session: Session) {
        guard let socket = session.socket else { return }
        var wanted: Interest = []
        if !session.outboundIsFull && session.unhandled.isEmpty && !session.inputClosed { wanted.insert(.readable) }
        if !session.outbound.isEmpty { wanted.insert(.writable) }
        guard wanted != session.interest else { return }
        do {
            try poller.modify(socket, interest: wanted, token: session.number)
            session.interest = wanted
        } catch {
            state.sessions.close(session, reason: "epoll_ctl: \(error)")
        }
    }
}
