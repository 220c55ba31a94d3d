import AccmonProtocol
import AccmonSys
import Glibc
import Synchronization

/// The socket under an ``AccmonConnection``: writes requests, and reads replies and events on a thread of its own.
///
/// A subscription's events go either to a push stream (``AccessorySubscription``, ``AccmonSession``) or to an
/// ``Observer`` called on the reader thread (``AccessoryObservation``).
final class Channel: Sendable {
    /// A subscription's handler, called on the reader thread.
    struct Observer: Sendable {
        /// Gets each update, with an event's line as the daemon wrote it (without its newline; empty for the snapshot).
        var update: @Sendable (SubscriptionUpdate, _ eventLine: [UInt8]) -> Void
        /// Called once the updates from one read of the socket have been handed over.
        var afterRead: (@Sendable () -> Void)?
        /// Finished when the subscription ends.
        var end: SubscriptionEnd
        /// Gets each claim change, for a subscription with claims.
        var claimUpdate: (@Sendable (ClaimUpdate) -> Void)? = nil
    }

    /// Replies and events may be large (a snapshot of many accessories): accept long lines from the daemon.
    private static let maximumIncomingLine = 64 << 20

    private typealias Reply = CheckedContinuation<Result<ServerMessage, AccmonError>, Never>
    private struct State {
        var nextRequestID: Int64 = 1
        var pending: [Int64: Reply] = [:]
        var pushes: AsyncThrowingStream<Push, any Error>.Continuation?
        var observer: Observer?
        /// Whether the observer is still to get the snapshot that answers its `subscribe`.
        var observerAwaitsSnapshot = false
        /// Connections the subscription knows as connected, for disconnect handlers.
        var connected: Set<ConnectionID> = []
        var disconnectHandlers: [ConnectionID: [@Sendable (Accessory) -> Void]] = [:]
        var closedByUser = false
        var endWaiters: [CheckedContinuation<Void, Never>] = []
        var ended: AccmonError?
        /// The notices of each claim of this connection, by claim id.
        var claimNotices: [String: AsyncStream<ClaimNotice>.Continuation] = [:]
        /// Notices of claims not registered yet (a `granted` may come before the claimer registers), bounded.
        var earlyNotices: [ClaimNotice] = []
    }

    private let descriptor: FileDescriptor
    private let state = Mutex(State())
    /// Held while writing; true once the reader closed the descriptor: its number may then belong to another file
    /// (a new connection), so nothing may be written through it any more.
    private let writeLock = Mutex(false)
    /// Runs tasks that prefer it on the reader thread.
    let executor: ReaderExecutor

    init(descriptor: FileDescriptor) throws(Errno) {
        self.descriptor = descriptor
        executor = try ReaderExecutor()
    }

    func startReading() throws(Errno) {
        try startThread(name: "accmon-reader") { [self] in readLoop() }
    }

    /// Sends `request` and waits for its reply. An `error` reply throws ``AccmonError/Code/requestFailed``.
    func request(_ request: ClientRequest) async throws(AccmonError) -> ServerMessage {
        let result = await withCheckedContinuation { (reply: Reply) in
            let outcome = state.withLock { state -> Result<Int64, AccmonError> in
                if let ended = state.ended { return .failure(ended) }
                let id = state.nextRequestID
                state.nextRequestID += 1
                state.pending[id] = reply
                return .success(id)
            }
            switch outcome {
            case .failure(let error):
                reply.resume(returning: .failure(error))
            case .success(let id):
                let line = ProtocolCodec().encode(ClientMessage(id: .number(id), request))
                do {
                    try writeLock.withLock { closed throws(Errno) in
                        guard !closed else { throw Errno(rawValue: EBADF) }
                        try descriptor.sendAll(line)
                    }
                } catch {
                    let waiting = state.withLock { $0.pending.removeValue(forKey: id) }
                    waiting?.resume(
                        returning: .failure(
                            AccmonError(.connectionClosed, "accmon: \(request.typeName): write to accmond: \(error)")))
                }
            }
        }
        let message = try result.get()
        if case .error(_, let error) = message {
            throw AccmonError(
                .requestFailed, "accmon: \(error.message) (\(error.code))", protocolError: error)
        }
        return message
    }

    /// Opens the stream that events (and a restore's messages) go to, ending any previous subscription; call before
    /// sending `subscribe` or a `hello` with a restore id, so that none can be missed.
    func openPushStream() -> AsyncThrowingStream<Push, any Error> {
        let (stream, continuation) = AsyncThrowingStream<Push, any Error>.makeStream()
        if let ended = replaceSubscription(with: { $0.pushes = continuation }) { continuation.finish(throwing: ended) }
        return stream
    }

    /// Makes `observer` the receiver of the snapshot that answers the next `subscribe` and of the events after it,
    /// ending any previous subscription; call before sending `subscribe`.
    func openObserver(_ observer: Observer) {
        let ended = replaceSubscription { state in
            state.observer = observer
            state.observerAwaitsSnapshot = true
        }
        if let ended { observer.end.finish(throwing: ended) }
    }

    /// Ends the current subscription and installs a new receiver with `install`; returns the connection's end instead
    /// when it has ended.
    private func replaceSubscription(with install: (inout State) -> Void) -> AccmonError? {
        typealias Replaced = (
            ended: AccmonError?, pushes: AsyncThrowingStream<Push, any Error>.Continuation?, observer: Observer?
        )
        let (ended, pushes, observer) = state.withLock { state -> Replaced in
            guard state.ended == nil else { return (state.ended, nil, nil) }
            defer {
                state.pushes = nil
                state.observer = nil
                state.observerAwaitsSnapshot = false
                state.connected = []
                install(&state)
            }
            return (nil, state.pushes, state.observer)
        }
        pushes?.finish()
        observer?.end.finish(throwing: nil)
        return ended
    }

    /// Ends the subscription, the push stream or the observer (after `unsubscribe`, or a failed `subscribe`).
    func finishSubscription(throwing error: AccmonError?) {
        let (pushes, observer) = state.withLock { state in
            defer {
                state.pushes = nil
                state.observer = nil
                state.disconnectHandlers = [:]
            }
            return (state.pushes, state.observer)
        }
        pushes?.finish(throwing: error)
        observer?.end.finish(throwing: error)
    }

    /// Runs `handler` once when `connectionID` disconnects; at once if it is not connected now.
    func onDisconnect(of accessory: Accessory, perform handler: @escaping @Sendable (Accessory) -> Void) {
        let registered = state.withLock { state in
            guard state.connected.contains(accessory.connectionID) else { return false }
            state.disconnectHandlers[accessory.connectionID, default: []].append(handler)
            return true
        }
        if !registered { handler(accessory) }
    }

    /// The notices of claim `claimID`, from now on (and any that came before it was registered); the stream finishes
    /// when the claim is forgotten with ``forgetClaim(_:)`` or the connection ends.
    func claimNotices(_ claimID: String) -> AsyncStream<ClaimNotice> {
        let (stream, continuation) = AsyncStream<ClaimNotice>.makeStream()
        let early = state.withLock { state -> [ClaimNotice]? in
            guard state.ended == nil else { return nil }
            state.claimNotices[claimID] = continuation
            defer { state.earlyNotices.removeAll { $0.claimID == claimID } }
            return state.earlyNotices.filter { $0.claimID == claimID }
        }
        guard let early else {
            continuation.finish()
            return stream
        }
        for notice in early { continuation.yield(notice) }
        return stream
    }

    /// Stops delivering claim `claimID`'s notices.
    func forgetClaim(_ claimID: String) {
        state.withLock { $0.claimNotices.removeValue(forKey: claimID) }?.finish()
    }

    /// Sends a line that expects no reply (an acknowledgement); a failure shows up on the reader thread.
    func send(_ request: ClientRequest) {
        let line = ProtocolCodec().encode(ClientMessage(request))
        _ = try? writeLock.withLock { closed throws(Errno) in  // try?: see above
            guard !closed else { return }
            try descriptor.sendAll(line)
        }
    }

    /// Returns once the connection has ended (closed by either side).
    func ended() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let alreadyEnded = state.withLock { state in
                if state.ended != nil { return true }
                state.endWaiters.append(continuation)
                return false
            }
            if alreadyEnded { continuation.resume() }
        }
    }

    func close() {
        let alreadyEnded = state.withLock { state in
            state.closedByUser = true
            return state.ended != nil
        }
        if !alreadyEnded { shutdownSocket(descriptor) }
    }

    // MARK: Reader thread

    private func readLoop() {
        var framer = LineFramer(limit: Self.maximumIncomingLine)
        let codec = ProtocolCodec()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var endError = AccmonError(.connectionClosed, "accmon: accmond closed the connection")
        executor.readerStarted()
        let watched = [descriptor, executor.wakeup.descriptor]
        while true {
            // Tasks that prefer the reader executor run between reads; the socket is not left unread for long.
            let moreJobs = executor.runWaitingJobs()
            let readable: ReadableSet
            do {
                readable = try waitForReadable(watched, timeoutMilliseconds: moreJobs ? 0 : -1)
            } catch {
                endError = AccmonError(.connectionClosed, "accmon: poll: \(error)")
                break
            }
            if readable.ready[1] { executor.wakeup.drain() }
            guard readable.ready[0] else { continue }
            let result = buffer.withUnsafeMutableBytes { raw in
                Result { () throws(Errno) -> Int in try descriptor.receive(into: raw) }
            }
            guard case .success(let count) = result, count > 0 else {
                if case .failure(let error) = result {
                    endError = AccmonError(.connectionClosed, "accmon: read from accmond: \(error)")
                }
                break
            }
            var stop: AccmonError?
            for item in framer.append(buffer[0..<count]) {
                // Lines longer than 64 MiB cannot come from accmond.
                guard case .line(let line) = item else { continue }
                stop = handle(line, codec)
                if stop != nil { break }
            }
            state.withLock { $0.observer?.afterRead }?()
            if let stop {
                endError = stop
                break
            }
        }
        writeLock.withLock { closed in
            descriptor.close()
            closed = true
        }
        end(endError)
        executor.readerEnded()
    }

    /// Decodes and dispatches one line; returns the error that ends the connection when the line does.
    private func handle(_ line: [UInt8], _ codec: ProtocolCodec) -> AccmonError? {
        // Event lines are nearly all the traffic: read the daemon's canonical form directly, and anything else (or
        // an event line from a daemon that writes another form) with the codec.
        if let event = EventLineReader.event(line) {
            dispatch(event, line: line)
            return nil
        }
        let message: ServerMessage
        do throws(ProtocolError) {
            message = try codec.decodeServerMessage(line)
        } catch {
            return AccmonError(.invalidResponse, "accmon: accmond sent an unreadable line: \(error.message)")
        }
        switch message {
        case .shutdown(let reason):
            return AccmonError(.daemonStopped, "accmon: accmond stopped: \(reason)")
        case .event(let event):
            dispatch(event, line: Array(codec.encode(message).dropLast()))
        default:
            dispatch(message)
        }
        return nil
    }

    /// Hands an event on; `line` is its line as ``ProtocolCodec`` encodes it, without the newline.
    private func dispatch(_ event: AccessoryEvent, line: [UInt8]) {
        let (handlers, observer) = state.withLock { state -> ([@Sendable (Accessory) -> Void], Observer?) in
            let id = event.accessory.connectionID
            switch event.change {
            case .connect:
                state.connected.insert(id)
                return ([], state.observer)
            case .disconnect:
                state.connected.remove(id)
                return (state.disconnectHandlers.removeValue(forKey: id) ?? [], state.observer)
            }
        }
        // Handlers first, outside the lock (they may call onDisconnect): as documented, a disconnect handler has run by
        // the time the event reaches the consumer.
        for handler in handlers { handler(event.accessory) }
        state.withLock { _ = $0.pushes?.yield(.event(event)) }
        observer?.update(.event(event), line)
    }

    /// Hands on a message other than an event or `shutdown`.
    private func dispatch(_ message: ServerMessage) {
        switch message {
        case .restore(let restored):
            state.withLock { state in
                state.connected = Set(restored.accessories.map(\.connectionID))
                state.pushes?.yield(.restore(restored))
            }
        case .restored(let sequence):
            state.withLock { _ = $0.pushes?.yield(.restored(sequence)) }
        case .claimNotice(let notice):
            state.withLock { state in
                if let continuation = state.claimNotices[notice.claimID] {
                    continuation.yield(notice)
                } else {
                    state.earlyNotices.append(notice)
                    if state.earlyNotices.count > 64 { state.earlyNotices.removeFirst() }
                }
            }
        case .claimUpdate(let update):
            let observer = state.withLock { state in
                _ = state.pushes?.yield(.claimUpdate(update))
                return state.observer
            }
            observer?.claimUpdate?(update)
        case .error(nil, let error):
            // An error not tied to a request (the daemon could not read a line of ours): it ends the subscription.
            finishSubscription(
                throwing: AccmonError(
                    .requestFailed, "accmon: accmond: \(error.message) (\(error.code))", protocolError: error))
        default:
            guard case .number(let id)? = message.requestID else { return }
            let (reply, snapshotObserver) = state.withLock { state -> (Reply?, Observer?) in
                var snapshotObserver: Observer?
                if case .snapshot(_, let snapshot) = message {
                    state.connected = Set(snapshot.accessories.map(\.connectionID))
                    if state.observerAwaitsSnapshot {
                        state.observerAwaitsSnapshot = false
                        snapshotObserver = state.observer
                    }
                }
                return (state.pending.removeValue(forKey: id), snapshotObserver)
            }
            // The observer gets the snapshot here, on the reader thread, before any event that follows it.
            if let snapshotObserver, case .snapshot(_, let snapshot) = message {
                snapshotObserver.update(.snapshot(snapshot), [])
            }
            reply?.resume(returning: .success(message))
        }
    }

    private func end(_ error: AccmonError) {
        let (pending, pushes, observer, closedByUser, waiters) = state.withLock { state in
            state.ended =
                state.closedByUser ? AccmonError(.connectionClosed, "accmon: the connection was closed") : error
            defer {
                state.pending = [:]
                state.pushes = nil
                state.observer = nil
                state.disconnectHandlers = [:]
            }
            defer { state.endWaiters = [] }
            for continuation in state.claimNotices.values { continuation.finish() }
            state.claimNotices = [:]
            return (state.pending, state.pushes, state.observer, state.closedByUser, state.endWaiters)
        }
        let failure = closedByUser ? AccmonError(.connectionClosed, "accmon: the connection was closed") : error
        for reply in pending.values { reply.resume(returning: .failure(failure)) }
        pushes?.finish(throwing: closedByUser ? nil : error)
        observer?.end.finish(throwing: closedByUser ? nil : error)
        for waiter in waiters { waiter.resume() }
    }
}
