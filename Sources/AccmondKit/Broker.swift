import AccmonCore
import AccmonSys
import Glibc
import Synchronization

/// A flag one thread raises to stop the broker loop.
final class StopFlag: Sendable {
    private let raised = Atomic<Bool>(false)
    func raise() { raised.store(true, ordering: .sequentiallyConsistent) }
    var isRaised: Bool { raised.load(ordering: .sequentiallyConsistent) }
}

/// The broker loop: one thread that owns the registry and every session.
///
/// Each event is encoded once; the same bytes are queued for every subscribed session whose filter matches, and
/// each session is flushed once per loop turn with as few system calls as its socket allows. Nothing here blocks:
/// a client that does not read only fills its own bounded queue.
final class Broker {
    private static let listenerToken: UInt64 = 0
    private static let wakeupToken: UInt64 = 1
    private static let signalToken: UInt64 = 2
    private static let firstSessionNumber: UInt64 = 16
    /// How long shutdown waits for clients to take the `shutdown` line.
    private static let shutdownGraceNanoseconds: UInt64 = 2_000_000_000
    private static let readChunk = 65_536

    private let configuration: DaemonConfiguration
    private var logger: Logger { configuration.logger }
    private var poller: Poller
    private var listener: FileDescriptor?
    private let sink: EventSink
    private let signals: SignalDescriptor?
    private let simulated: SimulatedEventSource?
    private let stopFlag: StopFlag
    private let codec = ProtocolCodec()
    private let startedAt = monotonicNanoseconds()
    private var readBuffer = [UInt8](repeating: 0, count: readChunk)

    private var registry = Registry()
    private var sessions: [UInt64: Session] = [:]
    private var nextSessionNumber = firstSessionNumber
    /// Sessions with output queued since the last flush.
    private var pendingFlush: Set<UInt64> = []
    /// Sessions to close at the end of this turn, with the reason for the log.
    private var pendingClose: [UInt64: String] = [:]

    init(
        configuration: DaemonConfiguration, listener: FileDescriptor, sink: EventSink,
        simulated: SimulatedEventSource?, stopFlag: StopFlag
    ) throws {
        self.configuration = configuration
        self.listener = listener
        self.sink = sink
        self.simulated = simulated
        self.stopFlag = stopFlag
        do {
            poller = try Poller()
            try poller.add(listener, interest: .readable, token: Self.listenerToken)
            try poller.add(sink.wakeup.descriptor, interest: .readable, token: Self.wakeupToken)
            if configuration.handlesSignals {
                let signals = try SignalDescriptor([SIGTERM, SIGINT])
                try poller.add(signals.descriptor, interest: .readable, token: Self.signalToken)
                self.signals = signals
            } else {
                signals = nil
            }
        } catch {
            throw DaemonError(description: "accmond: epoll: \(error)")
        }
    }

    /// Serves until a stop signal or request, then says goodbye to every client.
    func run() {
        while !stopFlag.isRaised {
            let ready: [Readiness]
            do {
                ready = try poller.wait(timeoutMilliseconds: -1)
            } catch {
                logger.error("epoll_wait: \(error)")
                continue
            }
            for readiness in ready {
                switch readiness.token {
                case Self.listenerToken: acceptClients()
                case Self.wakeupToken: sink.wakeup.drain()
                case Self.signalToken: receiveSignals()
                default: serve(readiness)
                }
            }
            publishSourceEvents()
            finishTurn()
        }
        shutDown()
    }

    // MARK: Clients

    private func acceptClients() {
        guard let listener else { return }
        while true {
            let descriptor: FileDescriptor
            do {
                guard let accepted = try UnixSocket.accept(listener) else { return }
                descriptor = accepted
            } catch {
                // EMFILE and friends: log and let the next readiness retry; clients wait in the backlog.
                logger.warning("accept: \(configuration.socketPath): \(error)")
                return
            }
            let number = nextSessionNumber
            nextSessionNumber += 1
            let peer = try? UnixSocket.peerCredentials(descriptor)  // try?: credentials are informational here
            let session = Session(
                number: number, descriptor: descriptor, peer: peer, outboundLimit: configuration.maximumOutboundBytes,
                now: monotonicNanoseconds())
            do {
                try poller.add(descriptor, interest: .readable, token: number)
            } catch {
                logger.warning("epoll_ctl: session \(session.sessionID): \(error)")
                descriptor.close()
                continue
            }
            sessions[number] = session
            logger.debug("client connected", session.metadata)
        }
    }

    private func serve(_ readiness: Readiness) {
        guard let session = sessions[readiness.token], pendingClose[session.number] == nil else { return }
        if readiness.writable { pendingFlush.insert(session.number) }
        if readiness.readable || readiness.hangup { read(session) }
    }

    private func read(_ session: Session) {
        let result = readBuffer.withUnsafeMutableBytes { buffer in
            Result { () throws(Errno) -> Int in try session.descriptor.read(into: buffer) }
        }
        let count: Int
        do throws(Errno) {
            count = try result.get()
        } catch {
            if error != .wouldBlock { close(session, reason: "read: \(error)") }
            return
        }
        if count == 0 {
            close(session, reason: "client closed the connection")
            return
        }
        session.lastActivity = monotonicNanoseconds()
        session.unhandled += session.framer.append(readBuffer[0..<count])
        handleUnhandledLines(of: session)
        pendingFlush.insert(session.number)
    }

    /// Handles the session's pending request lines while its outbound buffer has room for the replies.
    private func handleUnhandledLines(of session: Session) {
        var handled = 0
        defer { session.unhandled.removeFirst(handled) }
        for item in session.unhandled {
            guard !session.outboundIsFull, pendingClose[session.number] == nil else { return }
            handled += 1
            switch item {
            case .line(let line):
                if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { continue }  // blank lines are keep-alives
                switch codec.decodeClientMessage(line) {
                case .success(let message): handle(message, from: session)
                case .failure(let failure): reply(to: session, .error(id: failure.id, failure.error))
                }
            case .overlong:
                reply(
                    to: session,
                    .error(
                        id: nil,
                        ProtocolError(
                            .lineTooLong,
                            "message: line: longer than \(WireFormat.maximumLineLength) bytes; skipped to the next"
                                + " newline")))
            }
        }
    }

    private func handle(_ message: ClientMessage, from session: Session) {
        let id = message.id
        switch message.request {
        case .hello(let versions, let clientName):
            guard !session.greeted else {
                reply(to: session, .error(id: id, ProtocolError(.alreadyGreeted, "hello: session: already greeted")))
                return
            }
            guard let version = WireFormat.negotiate(clientVersions: versions) else {
                let range = WireFormat.supportedVersions
                reply(
                    to: session,
                    .error(
                        id: id,
                        ProtocolError(
                            .unsupportedVersion,
                            "hello: versions: none of \(versions) is spoken here (this daemon speaks"
                                + " \(range.lowerBound) to \(range.upperBound))")))
                return
            }
            session.greeted = true
            session.protocolVersion = version
            session.clientName = clientName
            logger.debug("client said hello", session.metadata)
            reply(
                to: session,
                .hello(id: id, version: version, daemonVersion: AccmonVersion.current, sessionID: session.sessionID))
        case .subscribe(let filter):
            guard session.subscription == nil else {
                reply(
                    to: session,
                    .error(id: id, ProtocolError(.alreadySubscribed, "subscribe: session: already subscribed")))
                return
            }
            // The loop owns both the registry and the session: the snapshot and the start of the stream are one
            // step, so nothing is missed or repeated between them.
            session.subscription = filter
            reply(to: session, .snapshot(id: id, registry.snapshot(matching: filter)))
        case .unsubscribe:
            guard session.subscription != nil else {
                reply(to: session, .error(id: id, ProtocolError(.notSubscribed, "unsubscribe: session: not subscribed")))
                return
            }
            session.subscription = nil
            session.suspendedByRequest = false
            _ = session.queue.removeAll()
            reply(to: session, .ok(id: id, connectionID: nil))
        case .suspend:
            guard session.subscription != nil else {
                reply(to: session, .error(id: id, ProtocolError(.notSubscribed, "suspend: session: not subscribed")))
                return
            }
            session.suspendedByRequest = true
            logger.debug("client suspended", session.metadata)
            reply(to: session, .ok(id: id, connectionID: nil))
        case .resume:
            guard session.subscription != nil else {
                reply(to: session, .error(id: id, ProtocolError(.notSubscribed, "resume: session: not subscribed")))
                return
            }
            // The reply goes first; the queued events follow as the socket takes them.
            session.suspendedByRequest = false
            logger.debug("client resumed", session.metadata.merging(["queue": String(session.queue.count)]) { $1 })
            reply(to: session, .ok(id: id, connectionID: nil))
        case .list(let filter):
            reply(to: session, .list(id: id, registry.snapshot(matching: filter)))
        case .status:
            reply(to: session, .status(id: id, status(for: session)))
        case .simulateConnect(let accessory):
            guard let simulated = simulatedSource(replyingTo: session, id: id) else { return }
            var accessory = accessory
            if accessory.accessoryID.isEmpty { accessory.accessoryID = accessory.derivedAccessoryID }
            let key = simulated.connect(accessory)
            publishSourceEvents()
            reply(to: session, .ok(id: id, connectionID: registry.accessory(under: key)?.connectionID))
        case .simulateDisconnect(let connectionID):
            guard let simulated = simulatedSource(replyingTo: session, id: id) else { return }
            guard let key = registry.key(of: connectionID), key.hasPrefix(SimulatedEventSource.keyPrefix) else {
                reply(
                    to: session,
                    .error(
                        id: id,
                        ProtocolError(
                            .noSuchConnection,
                            "simulate: connectionID: no simulated accessory is connected as \(connectionID)")))
                return
            }
            simulated.disconnect(key: key)
            publishSourceEvents()
            reply(to: session, .ok(id: id, connectionID: connectionID))
        }
    }

    private func simulatedSource(replyingTo session: Session, id: RequestID?) -> SimulatedEventSource? {
        if simulated == nil {
            reply(
                to: session,
                .error(
                    id: id,
                    ProtocolError(
                        .simulationDisabled,
                        "simulate: accmond: simulation is off; start accmond with --simulate to drive simulated"
                            + " accessories")))
        }
        return simulated
    }

    private func status(for session: Session) -> DaemonStatus {
        let now = monotonicNanoseconds()
        return DaemonStatus(
            daemonVersion: AccmonVersion.current, protocolVersion: session.protocolVersion,
            uptimeSeconds: Double(now - startedAt) / 1e9,
            connectedAccessories: registry.count, sessions: sessions.count, sequence: registry.sequence,
            simulate: simulated != nil,
            clients: sessions.values.sorted { $0.number < $1.number }.map { $0.status(now: now) })
    }

    // MARK: Events

    /// Moves the sources' reports into the registry and queues the resulting events for subscribers.
    private func publishSourceEvents() {
        for report in sink.take() {
            let events: [AccessoryEvent]
            switch report {
            case .attached(let key, let accessory): events = registry.attach(key: key, accessory)
            case .detached(let key): events = registry.detach(key: key)
            }
            for event in events { publish(event) }
        }
    }

    private func publish(_ event: AccessoryEvent) {
        logger.debug(
            "\(event.change.rawValue) \(event.accessory.kind.rawValue) \(event.accessory.usbID)",
            [
                "accessory.id": event.accessory.accessoryID, "connection.id": event.accessory.connectionID.description,
                "seq": String(event.sequence),
            ])
        var line: [UInt8]?
        for session in sessions.values {
            guard let filter = session.subscription, filter.matches(event.accessory),
                pendingClose[session.number] == nil
            else { continue }
            let bytes = line ?? codec.encode(.event(event))
            line = bytes
            deliver(event, bytes, to: session)
        }
    }

    /// Writes an event to a live session, or queues it for a suspended one: one that asked, one whose queue is not
    /// empty yet (order), or one whose outbound buffer is full (it stopped reading: suspended from now on).
    private func deliver(_ event: AccessoryEvent, _ line: [UInt8], to session: Session) {
        if session.isSuspended {
            session.queue.enqueue(event, payload: line)
        } else if session.outbound.fits(line) {
            session.outbound.append(line)
            pendingFlush.insert(session.number)
        } else {
            logger.info(
                "client does not read: suspending it and queueing its events",
                session.metadata.merging(["outbound.bytes": String(session.outbound.byteCount)]) { $1 })
            session.queue.enqueue(event, payload: line)
        }
    }

    private func reply(to session: Session, _ message: ServerMessage) {
        session.outbound.append(codec.encode(message))
        pendingFlush.insert(session.number)
    }

    // MARK: Turn end, closing, shutdown

    private func finishTurn() {
        for number in pendingFlush {
            guard let session = sessions[number], pendingClose[number] == nil else { continue }
            flush(session)
        }
        pendingFlush.removeAll(keepingCapacity: true)
        for (number, reason) in pendingClose {
            guard let session = sessions.removeValue(forKey: number) else { continue }
            poller.remove(session.descriptor)
            session.descriptor.close()
            logger.debug("client disconnected: \(reason)", session.metadata)
        }
        pendingClose.removeAll(keepingCapacity: true)
    }

    /// Writes what the socket takes, then refills the outbound buffer from the session's queue (when it is not
    /// suspended by request) and handles waiting requests, while that makes progress.
    private func flush(_ session: Session) {
        while true {
            let before = session.outbound.byteCount
            do throws(Errno) {
                _ = try session.outbound.flush(to: session.descriptor)
            } catch {
                close(session, reason: "write: \(error)")
                return
            }
            if session.outbound.byteCount < before { session.lastActivity = monotonicNanoseconds() }
            let wasSuspended = session.isSuspended
            if !session.suspendedByRequest {
                while let next = session.queue.first, session.outbound.fits(next.payload) {
                    session.outbound.append(next.payload)
                    _ = session.queue.popFirst()
                }
                if wasSuspended && !session.isSuspended { logger.debug("client caught up: live again", session.metadata) }
            }
            handleUnhandledLines(of: session)
            guard pendingClose[session.number] == nil else { return }
            let stalled = session.outbound.byteCount == 0 || session.outbound.byteCount >= before
            if stalled { break }
        }
        updateInterest(session)
    }

    /// Watches for writability while output waits, and for readability while there is room for replies.
    private func updateInterest(_ session: Session) {
        var wanted: Interest = []
        if !session.outboundIsFull && session.unhandled.isEmpty { wanted.insert(.readable) }
        if !session.outbound.isEmpty { wanted.insert(.writable) }
        guard wanted != session.interest else { return }
        do {
            try poller.modify(session.descriptor, interest: wanted, token: session.number)
            session.interest = wanted
        } catch {
            close(session, reason: "epoll_ctl: \(error)")
        }
    }

    private func close(_ session: Session, reason: String, level: LogLevel = .debug) {
        guard pendingClose[session.number] == nil else { return }
        pendingClose[session.number] = reason
        if level > .debug { logger.log(level, reason, session.metadata) }
    }

    private func receiveSignals() {
        while let signal = signals?.next() {
            logger.notice("received \(signal == SIGTERM ? "SIGTERM" : "SIGINT"); stopping")
            stopFlag.raise()
        }
    }

    /// Stops accepting, tells every client the daemon is going away, gives them a moment to read it, then closes.
    private func shutDown() {
        if let listener {
            poller.remove(listener)
            listener.close()
            self.listener = nil
            removeSocketFile()
        }
        let goodbye = codec.encode(.shutdown(reason: "the daemon is shutting down"))
        for session in sessions.values where pendingClose[session.number] == nil {
            session.outbound.append(goodbye)
            pendingFlush.insert(session.number)
        }
        let deadline = monotonicNanoseconds() + Self.shutdownGraceNanoseconds
        finishTurn()
        while sessions.values.contains(where: { !$0.outbound.isEmpty }) && monotonicNanoseconds() < deadline {
            let ready = (try? poller.wait(timeoutMilliseconds: 50)) ?? []  // try?: a failed wait just polls again
            for readiness in ready where readiness.token >= Self.firstSessionNumber {
                if let session = sessions[readiness.token], readiness.writable || readiness.hangup {
                    pendingFlush.insert(session.number)
                }
            }
            finishTurn()
        }
        for session in sessions.values {
            poller.remove(session.descriptor)
            session.descriptor.close()
        }
        sessions.removeAll()
    }

    private func removeSocketFile() {
        var info = stat()
        if lstat(configuration.socketPath, &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK {
            unlink(configuration.socketPath)
        }
    }
}
