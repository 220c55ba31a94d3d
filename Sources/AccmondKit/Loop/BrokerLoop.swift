import AccmonDevices
import AccmonLogging
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

/// The broker loop: one thread, one epoll set (the listening socket, the wake-up eventfd, a signalfd, the
/// loop-driven sources and every client socket). Each turn it serves what is ready, publishes the sources' reports,
/// puts a newly loaded manifest in force, flushes the sessions that got output, closes those that ended, expires
/// preserved sessions and saves the state when due. Nothing here blocks.
final class BrokerLoop {
    private static let listenerToken: UInt64 = 0
    private static let wakeupToken: UInt64 = 1
    private static let signalToken: UInt64 = 2
    /// Loop-driven sources get the tokens from here up to ``SessionTable/firstNumber``.
    private static let firstSourceToken: UInt64 = 3
    /// How long shutdown waits for clients to take the `shutdown` line.
    private static let shutdownGraceNanoseconds: UInt64 = 2_000_000_000
    static let readChunk = 65_536
    /// Connections accepted in one turn at most: the rest wait in the backlog for the next turn, after the
    /// connected clients' requests.
    static let acceptsPerTurn = 16

    let state: BrokerState
    let requests: RequestHandler
    let publisher: Publisher
    let persistence: Persistence
    var poller: Poller
    var listener: FileDescriptor?
    private let sink: EventSink
    private let signals: SignalDescriptor?
    private let loopDrivenSources: [any LoopDrivenEventSource]
    private let loadedManifests: Mailbox<LoadedManifest>
    private let stopFlag: StopFlag
    var readBuffer = [UInt8](repeating: 0, count: readChunk)
    var logger: Logger { state.logger }
    /// A descriptor kept open to be closed when `accept` runs out of them, so that the waiting client can be told.
    var spareDescriptor: FileDescriptor?
    /// Whether the listener is out of the epoll set (out of descriptors with no spare, or a user over its
    /// connection rate), until when at most, and whether a freed descriptor ends the pause.
    var listenerPaused = false
    private var listenerPausedUntil: UInt64 = 0
    private var listenerResumesOnFree = false
    var logThrottle = LogThrottle()
    /// Each user's connection rate (``DaemonLimits/connectsPerUserPerSecond``).
    var connectionRate: ConnectionRate
    /// The `too-many-connections` lines sent to refused clients, by reason: a flood of refusals encodes each once.
    var refusalLines: [String: [UInt8]] = [:]

    init(
        configuration: DaemonConfiguration, store: StateStore?, listener: FileDescriptor, sink: EventSink,
        simulated: SimulatedEventSource?, loopDrivenSources: [any LoopDrivenEventSource], stopFlag: StopFlag
    ) throws {
        precondition(
            loopDrivenSources.count <= SessionTable.firstNumber - Self.firstSourceToken, "too many loop-driven sources")
        self.listener = listener
        self.sink = sink
        self.loopDrivenSources = loopDrivenSources
        self.stopFlag = stopFlag
        connectionRate = ConnectionRate(
            perSecond: configuration.limits.connectsPerUserPerSecond, burst: configuration.limits.connectionsPerUser)
        state = BrokerState(
            configuration: configuration, simulated: simulated,
            history: try History(
                capacity: configuration.historyEntries, directory: store?.directory.directory,
                logger: configuration.logger))
        persistence = Persistence(state: state, store: store)
        store?.callAfterEachWrite { [wakeup = sink.wakeup] in wakeup.signal() }
        state.launcher = Launcher(state: state, persistence: persistence, wakeup: sink.wakeup)
        do {
            state.claims = try ClaimDesk.make(state: state, persistence: persistence, wakeup: sink.wakeup)
        } catch {
            throw DaemonError(description: "accmond: claims: \(error)")
        }
        publisher = Publisher(state: state, persistence: persistence, sink: sink)
        loadedManifests = Mailbox(wakeup: sink.wakeup)
        let loader: ManifestLoader
        do {
            loader = try ManifestLoader(
                mainPath: configuration.manifestPath, dropInDirectory: configuration.manifestDirectory,
                directory: configuration.accounts, results: loadedManifests)
        } catch {
            throw DaemonError(description: "accmond: manifest loader thread: \(error)")
        }
        requests = RequestHandler(
            state: state, publisher: publisher, persistence: persistence, manifestLoader: loader)
        if configuration.servesBus {
            do {
                state.bus = try BusFrontend(
                    state: state, publisher: publisher, persistence: persistence, manifestLoader: loader, address: nil,
                    wakeup: sink.wakeup)
            } catch {
                throw DaemonError(description: "accmond: bus thread: \(error)")
            }
        }
        state.claims?.resumeRequests = { [requests, state] session in
            requests.handlePendingLines(of: session)
            state.sessions.queueFlush(session)
        }
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
        // Room for every connection the limits allow, and the daemon's own descriptors.
        let descriptors = DescriptorLimit.raiseSoftLimit(to: configuration.limits.connections + 64)
        if descriptors < configuration.limits.connections + 16 {
            logger.notice(
                .limitReached,
                "open files: the limit is \(descriptors) descriptors, under --max-connections"
                    + " \(configuration.limits.connections): clients past it are refused as out of descriptors")
        }
        spareDescriptor = try? FileDescriptor.openReadOnly("/dev/null")  // try?: without it the listener pauses
        publisher.install(loader.loadNow(), initial: true)
        persistence.restore()
        // Simulated accessories outlive the daemon as hardware would, when it simulates again; otherwise no source
        // reports them any more, and they are disconnected at the first turn.
        let simulatedKeys = state.registry.connectedByKey.keys.filter { $0.hasPrefix(SimulatedEventSource.keyPrefix) }
        if let simulated {
            simulated.adopt(keys: simulatedKeys)
        } else if !simulatedKeys.isEmpty {
            sink.deliver([.inventory(keyPrefix: SimulatedEventSource.keyPrefix, keys: [])])
        }
        // Accessories remembered from before a restart are judged by the manifest now in force.
        _ = state.authorizer.reevaluate(state.registry.snapshot().accessories)
        // Claims kept across the restart hold again before the first client is served.
        state.claims?.enforceRestoredClaims()
    }

    /// Serves until a stop signal or request, then says goodbye to every client.
    func run() {
        persistence.reserveNumbers()
        while !stopFlag.isRaised {
            let ready: [Readiness]
            do {
                ready = try poller.wait(timeoutMilliseconds: nextTimeoutMilliseconds())
            } catch {
                logger.error(.transportFailure, "epoll_wait: \(error)")
                continue
            }
            var listenerReady = false
            for readiness in ready {
                switch readiness.token {
                case Self.listenerToken: listenerReady = true
                case Self.wakeupToken: sink.wakeup.drain()
                case Self.signalToken: receiveSignals()
                case Self.firstSourceToken..<SessionTable.firstNumber:
                    publisher.take(loopDrivenSources[Int(readiness.token - Self.firstSourceToken)].takeEvents())
                default: serve(readiness)
                }
            }
            // The connected clients first: what their requests and the sources made goes out before the turn takes
            // new connections or the request lines left over earlier turns' quotas.
            publisher.publishWaiting()
            state.sessions.flushPending { flush($0) }
            if listenerReady { acceptClients() }
            // Request lines left over their turn's quota, or held for their user's share of the loop: after every
            // client that was ready.
            for session in state.sessions.beginTurn() + state.sessions.takeReleased(now: monotonicNanoseconds())
            where !session.isClosing {
                requests.handlePendingLines(of: session)
                state.sessions.queueFlush(session)
            }
            publisher.publishWaiting()
            for loaded in loadedManifests.take() { requests.manifestLoaded(loaded) }
            // Bus calls after the socket's requests: both are served each turn, in the order their transports deliver.
            state.bus?.turn()
            state.launcher?.turn()
            state.claims?.turn()
            // Replies that waited for the state on disk, before this turn's flush.
            persistence.runAfterSaves()
            finishTurn()
            persistence.expirePreservedSessions()
            persistence.saveIfDue()
            state.configuration.onLoopTurn?(
                LoopTurn(
                    accessories: state.registry.count, clients: state.sessions.count, stopping: stopFlag.isRaised))
        }
        shutDown()
    }

    /// How long the loop may sleep: not at all while request lines wait for their turn; else until the next preserved
    /// session expires, the pending state save is due, or a paused listener is watched again.
    private func nextTimeoutMilliseconds() -> Int32 {
        if state.sessions.hasDeferredWork { return 0 }
        let now = monotonicNanoseconds()
        var wait = state.preserved.nanosecondsUntilNextExpiry(now: now)
        if let due = persistence.nanosecondsUntilSaveDue(now: now) { wait = min(wait ?? .max, due) }
        if let due = state.launcher?.nanosecondsUntilDue(now: now) { wait = min(wait ?? .max, due) }
        if let due = state.claims?.nanosecondsUntilDue(now: now) { wait = min(wait ?? .max, due) }
        if let held = state.sessions.heldUntil { wait = min(wait ?? .max, held > now ? held - now : 0) }
        if let held = state.bus?.heldUntil { wait = min(wait ?? .max, held > now ? held - now : 0) }
        if listenerPaused { wait = min(wait ?? .max, listenerPausedUntil > now ? listenerPausedUntil - now : 0) }
        guard let wait else { return -1 }
        return Int32(min(wait / 1_000_000 + 1, 60_000))
    }

    /// Flushes the sessions that got output this turn, then closes those that ended (keeping restorable ones); a
    /// paused listener is watched again once a descriptor is free.
    func finishTurn() {
        state.sessions.flushPending { flush($0) }
        let freed = state.sessions.hasClosedSessions
        state.sessions.removeClosed { release($0) }
        state.bus?.finishTurn()
        if listenerPaused && ((freed && listenerResumesOnFree) || monotonicNanoseconds() >= listenerPausedUntil) {
            resumeListener()
        }
    }

    /// Stops watching the listener for `nanoseconds` at most: out of descriptors with no spare to tell clients with
    /// (`resumesOnFree`: until a session closes), or a user over its connection rate.
    func pauseListener(for nanoseconds: UInt64 = 1_000_000_000, resumesOnFree: Bool = true) {
        guard let listener else { return }
        let until = monotonicNanoseconds() + nanoseconds
        if listenerPaused {
            listenerPausedUntil = max(listenerPausedUntil, until)
            listenerResumesOnFree = listenerResumesOnFree && resumesOnFree
            return
        }
        listenerPaused = true
        listenerPausedUntil = until
        listenerResumesOnFree = resumesOnFree
        try? poller.modify(listener, interest: [], token: Self.listenerToken)  // try?: then it stays watched
    }

    private func resumeListener() {
        guard let listener else { return }
        listenerPaused = false
        if spareDescriptor == nil { spareDescriptor = try? FileDescriptor.openReadOnly("/dev/null") }  // try?: later
        try? poller.modify(listener, interest: .readable, token: Self.listenerToken)  // try?: as in pauseListener
    }

    /// Closes a removed session's descriptor (a bus subscription's object goes) and keeps its session if it is
    /// restorable.
    private func release(_ session: Session) {
        if let socket = session.socket {
            poller.remove(socket)
            socket.close()
        } else {
            state.bus?.subscriptionRemoved(session)
        }
        state.claims?.sessionClosed(session)
        persistence.preserveIfRestorable(session)
    }

    private func receiveSignals() {
        while let signal = signals?.next() {
            if signal == SIGHUP {
                logger.notice(.reloadRequested, "received SIGHUP; reloading the manifest")
                _ = requests.manifestLoader.requestLoad()
                continue
            }
            logger.notice(.stopping, "received \(signal == SIGTERM ? "SIGTERM" : "SIGINT"); stopping")
            stopFlag.raise()
        }
    }

    /// Stops accepting, tells every client the daemon is going away, gives them a moment to read it, then closes.
    private func shutDown() {
        if let listener {
            poller.remove(listener)
            listener.close()
            self.listener = nil
            // The socket unit owns a passed socket's path.
            if state.configuration.inheritedListener == nil {
                UnixSocket.removeSocketFile(at: state.configuration.socketPath)
            }
        }
        // From here the poller waits only for clients to take the goodbye: a source or a wakeup that stays readable
        // (nothing takes its events any more) would make every wait return at once.
        poller.remove(sink.wakeup.descriptor)
        for source in loopDrivenSources { poller.remove(source.readinessDescriptor) }
        let goodbye = state.codec.encode(.shutdown(reason: "the daemon is shutting down"))
        for session in state.sessions.all where !session.isClosing && session.socket != nil {
            session.queueOutput(goodbye)
            state.sessions.queueFlush(session)
        }
        let deadline = monotonicNanoseconds() + Self.shutdownGraceNanoseconds
        finishTurn()
        // Socket clients take their goodbye; a bus subscription's buffer holds what its subscriber has not
        // acknowledged, which no wait empties.
        while state.sessions.all.contains(where: { $0.socket != nil && !$0.outbound.isEmpty })
            && monotonicNanoseconds() < deadline
        {
            let ready = (try? poller.wait(timeoutMilliseconds: 50)) ?? []  // try?: a failed wait just polls again
            for readiness in ready where readiness.token >= SessionTable.firstNumber {
                if let session = state.sessions[readiness.token], readiness.writable || readiness.hangup {
                    state.sessions.queueFlush(session)
                }
            }
            finishTurn()
        }
        // Claims outlive a stop: their holders come back with their tokens (the reclaim window).
        state.claims?.daemonStopping()
        state.sessions.removeAll { release($0) }
        persistence.save(waitForDisk: true)
        state.history.finish()
    }
}
