import AccmonDevices
import AccmonLogging
import AccmonManifest
import AccmonProtocol
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
    /// Loop-driven sources get the tokens from here up to ``firstSessionNumber``.
    private static let firstSourceToken: UInt64 = 3
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
    private let loopDrivenSources: [any LoopDrivenEventSource]
    /// Reports the loop-driven sources returned this turn, published after the sink's.
    private var loopDrivenReports: [SourceEvent] = []
    private let stopFlag: StopFlag
    private let codec = ProtocolCodec()
    private let startedAt = monotonicNanoseconds()
    private var readBuffer = [UInt8](repeating: 0, count: readChunk)

    private var registry: Registry
    private var sessions: [UInt64: Session] = [:]
    private var preserved: PreservedSessions
    private var authorizer: Authorizer
    private let store: StateStore?
    /// Sequence numbers and connection ids below these are reserved on disk.
    private var sequenceCeiling: UInt64 = 0
    private var connectionCeiling: UInt64 = 0
    /// Whether state changed since the last save, and when that save was.
    private var stateIsDirty = false
    private var lastSave: UInt64 = 0
    private var nextSessionNumber = firstSessionNumber
    /// Sessions with output queued since the last flush, in the order they got it: a request's events reach the
    /// subscribers before its reply reaches the requester.
    private var pendingFlush: [Session] = []
    /// Sessions to close at the end of this turn, in the order they were closed.
    private var pendingClose: [Session] = []

    init(
        configuration: DaemonConfiguration, listener: FileDescriptor, sink: EventSink,
        simulated: SimulatedEventSource?, loopDrivenSources: [any LoopDrivenEventSource], stopFlag: StopFlag
    ) throws {
        precondition(
            loopDrivenSources.count <= Self.firstSessionNumber - Self.firstSourceToken, "too many loop-driven sources")
        self.configuration = configuration
        self.listener = listener
        self.sink = sink
        self.simulated = simulated
        self.loopDrivenSources = loopDrivenSources
        self.stopFlag = stopFlag
        preserved = PreservedSessions(
            retentionSeconds: configuration.restoreRetentionSeconds,
            maximumCount: configuration.maximumPreservedSessions)
        do {
            store = try configuration.stateDirectory.map { try StateStore(directory: $0, logger: configuration.logger) }
        } catch {
            throw DaemonError(description: "accmond: state store: \(error)")
        }
        registry = Registry()
        authorizer = Authorizer(
            mainPath: configuration.manifestPath, dropInDirectory: configuration.manifestDirectory,
            logger: configuration.logger)
        do {
            poller = try Poller()
            try poller.add(listener, interest: .readable, token: Self.listenerToken)
            try poller.add(sink.wakeup.descriptor, interest: .readable, token: Self.wakeupToken)
            for (index, source) in loopDrivenSources.enumerated() {
                try poller.add(
                    source.readinessDescriptor, interest: .readable, token: Self.firstSourceToken + UInt64(index))
            }
            if configuration.handlesSignals {
                let signals = try SignalDescriptor([SIGTERM, SIGINT, SIGHUP])
                try poller.add(signals.descriptor, interest: .readable, token: Self.signalToken)
                self.signals = signals
            } else {
                signals = nil
            }
        } catch {
            throw DaemonError(description: "accmond: epoll: \(error)")
        }
        loadManifest(initial: true)
        if let saved = store?.load() { restore(saved) }
        // Accessories remembered from before a restart are judged by the manifest now in force.
        _ = authorizer.reevaluate(registry.snapshot().accessories)
    }

    /// Serves until a stop signal or request, then says goodbye to every client.
    func run() {
        reserveNumbers()
        while !stopFlag.isRaised {
            let ready: [Readiness]
            do {
                ready = try poller.wait(timeoutMilliseconds: nextTimeoutMilliseconds())
            } catch {
                logger.error("epoll_wait: \(error)")
                continue
            }
            for readiness in ready {
                switch readiness.token {
                case Self.listenerToken: acceptClients()
                case Self.wakeupToken: sink.wakeup.drain()
                case Self.signalToken: receiveSignals()
                case Self.firstSourceToken..<Self.firstSessionNumber:
                    loopDrivenReports += loopDrivenSources[Int(readiness.token - Self.firstSourceToken)].takeEvents()
                default: serve(readiness)
                }
            }
            publishSourceEvents()
            finishTurn()
            expirePreservedSessions()
            saveStateIfDue()
            configuration.onLoopTurn?(
                LoopTurn(accessories: registry.count, clients: sessions.count, stopping: stopFlag.isRaised))
        }
        shutDown()
    }

    /// How long the loop may sleep: until the next preserved session expires, or the pending state save is due.
    private func nextTimeoutMilliseconds() -> Int32 {
        let now = monotonicNanoseconds()
        var wait = preserved.nanosecondsUntilNextExpiry(now: now)
        if stateIsDirty {
            let due = lastSave &+ StateStore.writeIntervalNanoseconds
            wait = min(wait ?? .max, due > now ? due - now : 0)
        }
        guard let wait else { return -1 }
        return Int32(min(wait / 1_000_000 + 1, 60_000))
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
        guard let session = sessions[readiness.token], !session.isClosing else { return }
        if readiness.writable { queueFlush(session) }
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
            if error != .wouldBlock { close(session, reason: "read: \(error)") }
            return
        }
        if count == 0 {
            // A half-close (shutdown of the client's writing side) still wants its replies and, when subscribed,
            // the events; a full close shows as a hang-up, or as a write error later.
            if hangup || (session.subscription == nil && session.outbound.isEmpty && session.unhandled.isEmpty) {
                close(session, reason: "client closed the connection")
            } else {
                session.inputClosed = true
                queueFlush(session)
            }
            return
        }
        session.lastActivity = monotonicNanoseconds()
        readBuffer.withUnsafeBufferPointer { buffer in
            let received = UnsafeBufferPointer(rebasing: buffer[..<count])
            // The end of a line begun in an earlier read joins its start in the framer, and is handled first.
            var start = session.framer.bytesEndingPendingLine(in: received)
            session.framer.append(UnsafeBufferPointer(rebasing: received[..<start]), to: &session.unhandled)
            handleUnhandledLines(of: session)
            if session.unhandled.isEmpty { start = handleWholeLines(received, from: start, of: session) }
            session.framer.append(UnsafeBufferPointer(rebasing: received[start...]), to: &session.unhandled)
        }
        handleUnhandledLines(of: session)
        queueFlush(session)
    }

    /// Handles the whole lines of `received` from `start`, where they were read, while the outbound buffer has room
    /// for the replies: a client's requests then need no copy. Returns where it stopped; the bytes from there go
    /// through the framer.
    private func handleWholeLines(_ received: UnsafeBufferPointer<UInt8>, from start: Int, of session: Session) -> Int {
        var start = start
        while !session.outboundIsFull, !session.isClosing,
            let line = session.framer.wholeLine(in: received, from: start)
        {
            handleLine(UnsafeBufferPointer(rebasing: received[line]), of: session)
            start = line.upperBound + 1
        }
        return start
    }

    /// Handles the session's pending request lines while its outbound buffer has room for the replies.
    private func handleUnhandledLines(of session: Session) {
        var handled = 0
        defer { session.unhandled.removeFirst(handled) }
        for item in session.unhandled {
            guard !session.outboundIsFull, !session.isClosing else { return }
            handled += 1
            switch item {
            case .line(let line):
                handleLine(line, of: session)
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

    /// Handles one request line; a blank line is a keep-alive.
    private func handleLine(_ line: some Collection<UInt8>, of session: Session) {
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return }
        switch codec.decodeClientMessage(line) {
        case .success(let message): handle(message, from: session)
        case .failure(let failure): reply(to: session, .error(id: failure.id, failure.error))
        }
    }

    private func handle(_ message: ClientMessage, from session: Session) {
        let id = message.id
        switch message.request {
        case .hello(let versions, let clientName, let restoreID):
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
            var restoreKey: RestoreKey?
            if let restoreID {
                guard !restoreID.isEmpty else {
                    reply(
                        to: session, .error(id: id, ProtocolError(.invalidField, "hello: restoreID: must not be empty"))
                    )
                    return
                }
                guard let uid = session.peer?.uid else {
                    reply(
                        to: session,
                        .error(
                            id: id,
                            ProtocolError(
                                .invalidField, "hello: restoreID: the daemon could not read this client's credentials"))
                    )
                    return
                }
                let key = RestoreKey(uid: uid, restoreID: restoreID)
                guard !sessions.values.contains(where: { $0.restoreKey == key && !$0.isClosing })
                else {
                    reply(
                        to: session,
                        .error(
                            id: id,
                            ProtocolError(
                                .restoreIDInUse,
                                "hello: restoreID: '\(restoreID)' is in use by another connection of this user")))
                    return
                }
                // Its previous connection hung up in this loop turn and would be kept only at the turn's end: kept
                // now, so that this hello reclaims it.
                if let leaving = sessions.values.first(where: { $0.restoreKey == key && $0.isClosing }) {
                    preserveIfRestorable(leaving)
                    leaving.restoreKey = nil
                }
                restoreKey = key
            }
            session.greeted = true
            session.protocolVersion = version
            session.clientName = clientName
            session.restoreKey = restoreKey
            logger.debug("client said hello", session.metadata)
            let kept = restoreKey.flatMap { preserved.claim($0) }
            reply(
                to: session,
                .hello(
                    id: id, version: version, daemonVersion: AccmonVersion.current, sessionID: session.sessionID,
                    restored: kept != nil))
            if let kept { handBack(kept, to: session) }
        case .subscribe(let filter, let includeRejected):
            guard !includeRejected || requireAdmin(session, id: id, for: "subscribe: all") else { return }
            guard session.subscription == nil else {
                reply(
                    to: session,
                    .error(id: id, ProtocolError(.alreadySubscribed, "subscribe: session: already subscribed")))
                return
            }
            // The loop owns both the registry and the session: the snapshot and the start of the stream are one
            // step, so nothing is missed or repeated between them.
            session.subscription = Subscription(filter: filter, includesRejected: includeRejected)
            let snapshot = visibleSnapshot(for: session.principal, filter: filter, includeRejected: includeRejected)
            if session.restoreKey != nil {
                session.memory = SessionMemory(filter: filter, snapshot: snapshot)
                stateIsDirty = true
            }
            reply(to: session, .snapshot(id: id, snapshot))
        case .unsubscribe:
            guard session.subscription != nil else {
                reply(
                    to: session, .error(id: id, ProtocolError(.notSubscribed, "unsubscribe: session: not subscribed")))
                return
            }
            session.subscription = nil
            session.suspendedByRequest = false
            _ = session.queue.removeAll()
            if session.memory != nil {
                session.memory = nil
                stateIsDirty = true
            }
            reply(to: session, .ok(id: id, connectionID: nil))
        case .acknowledge(let sequence):
            // No reply: acknowledgements stream with the events. Only sessions with a restore id keep them.
            if session.memory != nil {
                session.memory!.acknowledge(sequence)
                stateIsDirty = true
            }
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
        case .list(let filter, let includeRejected):
            guard !includeRejected || requireAdmin(session, id: id, for: "list: all") else { return }
            reply(
                to: session,
                .list(id: id, visibleSnapshot(for: session.principal, filter: filter, includeRejected: includeRejected))
            )
        case .reloadManifest:
            guard requireAdmin(session, id: id, for: "reload") else { return }
            let problems = loadManifest(initial: false)
            if problems.isEmpty {
                reply(to: session, .ok(id: id, connectionID: nil))
            } else {
                reply(
                    to: session,
                    .error(
                        id: id,
                        ProtocolError(
                            .manifestInvalid,
                            "reload: manifest: \(problems.count) \(problems.count == 1 ? "problem" : "problems"), the "
                                + "previous manifest stays in force: "
                                + problems.map(\.description).joined(separator: "; "))))
            }
        case .status:
            reply(to: session, .status(id: id, status(for: session)))
        case .simulateConnect(let accessory):
            guard requireAdmin(session, id: id, for: "simulate") else { return }
            guard let simulated = simulatedSource(replyingTo: session, id: id) else { return }
            var accessory = accessory
            if accessory.accessoryID.isEmpty { accessory.accessoryID = accessory.derivedAccessoryID }
            let report = simulated.connect(accessory)
            publishSourceEvents()  // what other sources reported first
            // A simulated device's key is new: its report is one connect, which gives the connection id.
            let connected = apply(report).last { $0.change == .connect }
            reply(to: session, .ok(id: id, connectionID: connected?.accessory.connectionID))
        case .simulateDisconnect(let connectionID):
            guard requireAdmin(session, id: id, for: "simulate") else { return }
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
            publishSourceEvents()
            apply(simulated.disconnect(key: key))
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
        // Other users' sessions are for admins: an ordinary client sees its own user's.
        let admin = authorizer.isAdmin(session.principal)
        let uid = session.principal?.uid
        return DaemonStatus(
            daemonVersion: AccmonVersion.current, protocolVersion: session.protocolVersion,
            uptimeSeconds: Double(now - startedAt) / 1e9,
            connectedAccessories: registry.count, sessions: sessions.count, sequence: registry.sequence,
            simulate: simulated != nil,
            clients: sessions.values.filter { admin || $0.principal?.uid == uid }.sorted { $0.number < $1.number }
                .map { $0.status(now: now) }
                + preserved.sessions.filter { admin || $0.key.uid == uid }.sorted { $0.value.since < $1.value.since }
                .map { key, kept in
                    SessionStatus(
                        sessionID: "restore:\(key.restoreID)", clientName: kept.clientName, pid: 0, uid: key.uid,
                        state: .preserved, suspendedBecause: "", subscribed: true,
                        queuedEvents: kept.memory.replay.count, outboundBytes: 0,
                        idleSeconds: Double(now &- kept.since) / 1e9)
                },
            manifest: authorizer.status)
    }

    // MARK: The manifest and who sees what

    /// Refuses (with `permission-denied`) a client that is neither root nor an admin of the manifest.
    private func requireAdmin(_ session: Session, id: RequestID?, for operation: String) -> Bool {
        if authorizer.isAdmin(session.principal) { return true }
        reply(
            to: session,
            .error(
                id: id,
                ProtocolError(
                    .permissionDenied,
                    "\(operation): \(session.principal?.description ?? "this client"): only root and the manifest's "
                        + "admins may do this")))
        return false
    }

    /// What a client may see of the connected accessories, as it sees them (with the manifest's protocol strings).
    private func visibleSnapshot(
        for principal: ClientPrincipal?, filter: AccessoryFilter, includeRejected: Bool
    )
        -> Snapshot
    {
        let all = registry.snapshot()
        var accessories: [Accessory] = []
        var rejected: [ConnectionID: String] = [:]
        for accessory in all.accessories {
            guard let verdict = authorizer.verdict(accessory.connectionID),
                verdict.isVisible(to: principal, includingRejected: includeRejected)
            else { continue }
            let announced = verdict.announced(accessory)
            guard filter.matches(announced) else { continue }
            accessories.append(announced)
            if let reason = verdict.rejection { rejected[accessory.connectionID] = reason }
        }
        return Snapshot(sequence: all.sequence, accessories: accessories, rejected: rejected)
    }

    /// Loads the manifest; after a reload, re-decides every connected accessory and tells each client what it now
    /// sees or no longer sees. A manifest with problems changes nothing.
    @discardableResult
    private func loadManifest(initial: Bool) -> [ManifestProblem] {
        let problems = authorizer.load()
        guard problems.isEmpty else {
            for problem in problems { logger.error("manifest: \(problem)") }
            logger.error(
                initial
                    ? "manifest: not loaded; every accessory is rejected until a reload succeeds"
                    : "manifest: reload refused; the previous manifest stays in force")
            return problems
        }
        logger.notice(
            "manifest loaded: \(authorizer.manifest.entries.count) entries",
            ["manifest.files": authorizer.files.joined(separator: ",")])
        if !initial { reevaluateVisibility() }
        return []
    }

    /// After a reload: for each connected accessory whose visibility changed for some client (live or preserved),
    /// a connect (to those who now see it) or a disconnect (to those who no longer do), each with a sequence
    /// number of its own.
    private func reevaluateVisibility() {
        let connected = registry.snapshot().accessories
        let old = authorizer.reevaluate(connected)
        for accessory in connected {
            let before = old[accessory.connectionID] ?? .rejected(reason: "")
            let after = authorizer.verdict(accessory.connectionID) ?? before
            guard before != after else { continue }
            if let reason = after.rejection {
                logger.notice("accessory rejected after reload: \(reason)", metadata(for: accessory))
            }
            var lost: [Session] = []
            var gained: [Session] = []
            for session in sessions.values {  // closing ones too: a kept session needs the event
                let was = session.receives(before.announced(accessory), verdict: before)
                let now = session.receives(after.announced(accessory), verdict: after)
                if was && !now { lost.append(session) }
                if now && !was { gained.append(session) }
            }
            /// Whether a preserved session (which never includes rejected accessories) sees it under `verdict`.
            func sees(_ verdict: Authentication, _ kept: PreservedSession) -> Bool {
                verdict.isVisible(to: kept.principal, includingRejected: false)
                    && kept.memory.filter.matches(verdict.announced(accessory))
            }
            var lostPreserved: [RestoreKey] = []
            var gainedPreserved: [RestoreKey] = []
            for (key, kept) in preserved.sessions {
                let was = sees(before, kept)
                let now = sees(after, kept)
                if was && !now { lostPreserved.append(key) }
                if now && !was { gainedPreserved.append(key) }
            }
            if !lost.isEmpty || !lostPreserved.isEmpty {
                reserveNumbers()
                let event = registry.visibilityEvent(.disconnect, before.announced(accessory))
                let line = codec.encode(.event(event))
                for session in lost { deliver(event, line, to: session) }
                preserved.record(event, line: line, for: lostPreserved)
            }
            if !gained.isEmpty || !gainedPreserved.isEmpty {
                reserveNumbers()
                var event = registry.visibilityEvent(.connect, after.announced(accessory))
                event.rejection = after.rejection
                let line = codec.encode(.event(event))
                for session in gained { deliver(event, line, to: session) }
                preserved.record(event, line: line, for: gainedPreserved)
            }
        }
        stateIsDirty = true
    }

    private func metadata(for accessory: Accessory) -> [String: String] {
        [
            "accessory.id": accessory.accessoryID, "connection.id": accessory.connectionID.description,
            "accessory.sysfs": accessory.sysfsPath,
        ]
    }

    // MARK: Events

    /// Moves the sources' reports into the registry and queues the resulting events for subscribers.
    ///
    /// The sink's come first: they include the loop-driven sources' start-up enumerations.
    private func publishSourceEvents() {
        for report in sink.take() { apply(report) }
        for report in loopDrivenReports { apply(report) }
        loopDrivenReports.removeAll(keepingCapacity: true)
    }

    /// Applies one source report to the registry and publishes the events that result, which it returns.
    @discardableResult
    private func apply(_ report: SourceEvent) -> [AccessoryEvent] {
        let events: [AccessoryEvent]
        switch report {
        case .attached(let key, let accessory): events = registry.attach(key: key, accessory)
        case .detached(let key): events = registry.detach(key: key)
        case .inventory(let prefix, let keys): events = registry.reconcile(keyPrefix: prefix, present: keys)
        }
        for event in events {
            reserveNumbers()
            publish(event)
        }
        return events
    }

    private func publish(_ event: AccessoryEvent) {
        logger.debug(
            "\(event.change.rawValue) \(event.accessory.kind.rawValue) \(event.accessory.usbID)",
            metadata(for: event.accessory).merging(["seq": String(event.sequence)]) { $1 })
        let verdict: Authentication
        switch event.change {
        case .connect:
            verdict = authorizer.admit(event.accessory)
            if let reason = verdict.rejection {
                logger.notice("accessory rejected: \(reason)", metadata(for: event.accessory))
            }
        case .disconnect:
            verdict = authorizer.release(event.accessory.connectionID) ?? .rejected(reason: "")
        }
        // Encoded at most twice, whatever the number of clients: as ordinary clients see it, and as admins who
        // asked for rejected accessories see a rejected one.
        var announced = event
        announced.accessory = verdict.announced(event.accessory)
        announced.rejection = event.change == .connect ? verdict.rejection : nil
        var line: [UInt8]?
        for session in sessions.values where session.receives(announced.accessory, verdict: verdict) {
            let bytes = line ?? codec.encode(.event(announced))
            line = bytes
            deliver(announced, bytes, to: session)
        }
        if !preserved.sessions.isEmpty {
            let bytes = line ?? codec.encode(.event(announced))
            preserved.record(announced, line: bytes) { verdict.isVisible(to: $0, includingRejected: false) }
            stateIsDirty = true
        }
    }

    /// Writes an event to a live session, or queues it for a suspended one: one that asked, one whose queue is not
    /// empty yet (order), or one whose outbound buffer is full (it stopped reading: suspended from now on). A session
    /// closing at the end of this turn only records it in its memory, which is kept when it has a restore id.
    private func deliver(_ event: AccessoryEvent, _ line: [UInt8], to session: Session) {
        if session.memory != nil {
            session.memory!.record(event, line: line)
            stateIsDirty = true
        }
        if session.isClosing { return }
        if session.isSuspended {
            session.queue.enqueue(event, payload: line)
        } else if session.outbound.fits(line) {
            session.outbound.append(line)
            queueFlush(session)
        } else {
            logger.info(
                "client does not read: suspending it and queueing its events",
                session.metadata.merging(["outbound.bytes": String(session.outbound.byteCount)]) { $1 })
            session.queue.enqueue(event, payload: line)
        }
    }

    private func reply(to session: Session, _ message: ServerMessage) {
        session.outbound.append(codec.encode(message))
        queueFlush(session)
    }

    // MARK: Turn end, closing, shutdown

    private func queueFlush(_ session: Session) {
        guard !session.flushQueued else { return }
        session.flushQueued = true
        pendingFlush.append(session)
    }

    private func finishTurn() {
        // By index: a flush can queue other sessions' output (a waiting request handled once there is room), and
        // those are flushed in this turn too.
        var index = 0
        while index < pendingFlush.count {
            let session = pendingFlush[index]
            index += 1
            if !session.isClosing { flush(session) }
            session.flushQueued = false
        }
        pendingFlush.removeAll(keepingCapacity: true)
        for session in pendingClose {
            sessions.removeValue(forKey: session.number)
            poller.remove(session.descriptor)
            session.descriptor.close()
            preserveIfRestorable(session)
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
                if wasSuspended && !session.isSuspended {
                    logger.debug("client caught up: live again", session.metadata)
                }
            }
            handleUnhandledLines(of: session)
            guard !session.isClosing else { return }
            if session.inputClosed && session.subscription == nil && session.outbound.isEmpty
                && session.unhandled.isEmpty
            {
                close(session, reason: "client closed its side after its last request")
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
            close(session, reason: "epoll_ctl: \(error)")
        }
    }

    private func close(_ session: Session, reason: String, level: LogLevel = .debug) {
        guard !session.isClosing else { return }
        session.isClosing = true
        pendingClose.append(session)
        if level > .debug { logger.log(level, reason, session.metadata) }
        logger.debug("client disconnected: \(reason)", session.metadata)
    }

    private func receiveSignals() {
        while let signal = signals?.next() {
            if signal == SIGHUP {
                logger.notice("received SIGHUP; reloading the manifest")
                loadManifest(initial: false)
                continue
            }
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
        // From here the poller waits only for clients to take the goodbye: a source or a wakeup that stays readable
        // (nothing takes its events any more) would make every wait return at once.
        poller.remove(sink.wakeup.descriptor)
        for source in loopDrivenSources { poller.remove(source.readinessDescriptor) }
        let goodbye = codec.encode(.shutdown(reason: "the daemon is shutting down"))
        for session in sessions.values where !session.isClosing {
            session.outbound.append(goodbye)
            queueFlush(session)
        }
        let deadline = monotonicNanoseconds() + Self.shutdownGraceNanoseconds
        finishTurn()
        while sessions.values.contains(where: { !$0.outbound.isEmpty }) && monotonicNanoseconds() < deadline {
            let ready = (try? poller.wait(timeoutMilliseconds: 50)) ?? []  // try?: a failed wait just polls again
            for readiness in ready where readiness.token >= Self.firstSessionNumber {
                if let session = sessions[readiness.token], readiness.writable || readiness.hangup {
                    queueFlush(session)
                }
            }
            finishTurn()
        }
        for session in sessions.values {
            poller.remove(session.descriptor)
            session.descriptor.close()
            preserveIfRestorable(session)
        }
        sessions.removeAll()
        if store != nil { saveState(waitForDisk: true) }
    }

    // MARK: Restore ids and persistence

    /// Keeps the session of a client that went away, if it registered a restore id and was subscribed.
    private func preserveIfRestorable(_ session: Session) {
        guard let key = session.restoreKey, let memory = session.memory else { return }
        let kept = PreservedSession(
            clientName: session.clientName, principal: session.principal, memory: memory,
            since: monotonicNanoseconds(), sinceWallClock: wallClockSeconds())
        for dropped in preserved.preserve(kept, as: key) {
            logger.notice(
                "preserved session dropped: more than \(preserved.maximumCount) are kept",
                ["restore.id": dropped.restoreID, "client.uid": String(dropped.uid)])
        }
        stateIsDirty = true
        logger.info(
            "client gone; session preserved for its restore id",
            session.metadata.merging(["restore.id": key.restoreID, "replay": String(memory.replay.count)]) { $1 })
    }

    /// Hands a preserved session to its returning client: the state as of its last acknowledgement, the events
    /// since (coalesced), then the `restored` marker; live events follow.
    private func handBack(_ kept: PreservedSession, to session: Session) {
        session.memory = kept.memory
        session.subscription = Subscription(filter: kept.memory.filter, includesRejected: false)
        reply(to: session, .restore(kept.memory.restoreState))
        for entry in kept.memory.replay.contents { session.outbound.append(entry.payload) }
        reply(to: session, .restored(sequence: registry.sequence))
        stateIsDirty = true
        logger.info(
            "session restored",
            session.metadata.merging([
                "restore.id": session.restoreKey?.restoreID ?? "", "replay": String(kept.memory.replay.count),
            ]) { $1 })
    }

    private func expirePreservedSessions() {
        for key in preserved.expire(now: monotonicNanoseconds()) {
            stateIsDirty = true
            logger.notice(
                "preserved session expired after \(Int(configuration.restoreRetentionSeconds)) s",
                ["restore.id": key.restoreID, "client.uid": String(key.uid)])
        }
    }

    /// Keeps the reserved ceilings ahead of the counters, saving at once when they must move: numbers issued after
    /// a crash then never repeat ones issued before it.
    private func reserveNumbers() {
        guard store != nil else { return }
        let margin: UInt64 = 16
        guard registry.sequence + margin >= sequenceCeiling || registry.lastConnectionID + margin >= connectionCeiling
        else { return }
        sequenceCeiling = registry.sequence + StateStore.reservation
        connectionCeiling = registry.lastConnectionID + StateStore.reservation
        saveState(waitForDisk: true)
    }

    private func saveStateIfDue() {
        guard stateIsDirty, store != nil,
            monotonicNanoseconds() &- lastSave >= StateStore.writeIntervalNanoseconds
        else { return }
        saveState()
    }

    /// Saves the state: on the store's writer thread, or at once when `waitForDisk` (reservations, shutdown).
    private func saveState(waitForDisk: Bool = false) {
        guard let store else { return }
        let now = wallClockSeconds()
        var entries = preserved.sessions.map { key, kept in
            PersistedState.PreservedEntry(
                key: key, clientName: kept.clientName, gids: kept.principal?.gids ?? [], memory: kept.memory,
                preservedAt: kept.sinceWallClock)
        }
        // Live sessions with a restore id are saved as preserved: after a crash their clients come back to them.
        for session in sessions.values {
            guard let key = session.restoreKey, let memory = session.memory else { continue }
            entries.append(
                PersistedState.PreservedEntry(
                    key: key, clientName: session.clientName, gids: session.principal?.gids ?? [], memory: memory,
                    preservedAt: now))
        }
        let state = PersistedState(
            sequenceCeiling: sequenceCeiling, connectionCeiling: connectionCeiling,
            connected: registry.connectedByKey.map { PersistedState.ConnectedEntry(key: $0.key, accessory: $0.value) },
            sessions: entries)
        if waitForDisk {
            store.saveNow(state)
        } else {
            store.save(state)
        }
        stateIsDirty = false
        lastSave = monotonicNanoseconds()
    }

    /// Starts from saved state: the counters after their reserved ceilings, the connected set (reconciled with the
    /// sources' start-up enumerations), and the preserved sessions with the time they have left.
    private func restore(_ saved: PersistedState) {
        registry = Registry(
            lastSequence: saved.sequenceCeiling, lastConnectionID: saved.connectionCeiling,
            connected: Dictionary(saved.connected.map { ($0.key, $0.accessory) }) { first, _ in first })
        let now = monotonicNanoseconds()
        let wallNow = wallClockSeconds()
        for entry in saved.sessions {
            let age = max(0, wallNow - entry.preservedAt)
            let kept = PreservedSession(
                clientName: entry.clientName, principal: ClientPrincipal(uid: entry.uid, gids: entry.gids),
                memory: entry.memory(codec: codec),
                since: now &- UInt64(min(age, 1e9) * 1e9), sinceWallClock: entry.preservedAt)
            _ = preserved.preserve(kept, as: RestoreKey(uid: entry.uid, restoreID: entry.restoreID))
        }
        logger.notice(
            "state restored: \(saved.connected.count) accessories, \(saved.sessions.count) preserved sessions",
            ["seq": String(saved.sequenceCeiling)])
    }

    private func removeSocketFile() {
        guard configuration.inheritedListener == nil else { return }  // the socket unit owns a passed socket's path
        var info = stat()
        if lstat(configuration.socketPath, &info) == 0 && info.st_mode & S_IFMT == S_IFSOCK {
            unlink(configuration.socketPath)
        }
    }
}
