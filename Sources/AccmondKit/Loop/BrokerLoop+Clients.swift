import AccmonLogging
import AccmonProtocol
import AccmonSys

/// The clients' sockets: accepting, reading request bytes, and writing what the sessions queued.
extension BrokerLoop {
    func acceptClients() {
        guard let listener else { return }
        while true {
            let descriptor: FileDescriptor
            do {
                guard let accepted = try UnixSocket.accept(listener) else { return }
                descriptor = accepted
            } catch {
                // EMFILE and friends: log and let the next readiness retry; clients wait in the backlog.
                logger.warning(.transportFailure, "accept: \(state.configuration.socketPath): \(error)")
                return
            }
            let number = state.sessions.takeNumber()
            let peer = try? UnixSocket.peerCredentials(descriptor)  // try?: without them the client is nobody
            let session = Session(
                number: number, descriptor: descriptor, peer: peer,
                outboundLimit: state.configuration.maximumOutboundBytes, now: monotonicNanoseconds())
            do {
                try poller.add(descriptor, interest: .readable, token: number)
            } catch {
                logger.warning(.transportFailure, "epoll_ctl: session \(session.sessionID): \(error)")
                descriptor.close()
                continue
            }
            state.sessions.add(session)
            logger.debug(.clientConnected, "client connected", session.metadata)
        }
    }

    func serve(_ readiness: Readiness) {
        guard let session = state.sessions[readiness.token], !session.isClosing else { return }
        if readiness.writable { state.sessions.queueFlush(session) }
        if readiness.readable || readiness.hangup { read(session, hangup: readiness.hangup) }
    }

    private func read(_ session: Session, hangup: Bool) {
        let result = readBuffer.withUnsafeMutableBytes { buffer in
            Result { () throws(Errno) -> Int in try session.descriptor.receive(into: buffer) }
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
        var wanted: Interest = []
        if !session.outboundIsFull && session.unhandled.isEmpty && !session.inputClosed { wanted.insert(.readable) }
        if !session.outbound.isEmpty { wanted.insert(.writable) }
        guard wanted != session.interest else { return }
        do {
            try poller.modify(session.descriptor, interest: wanted, token: session.number)
            session.interest = wanted
        } catch {
            state.sessions.close(session, reason: "epoll_ctl: \(error)")
        }
    }
}
