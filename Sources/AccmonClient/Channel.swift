import AccmonCore
import AccmonSys
import Synchronization

/// The socket under an ``AccmonConnection``: writes requests, and reads replies and events on a thread of its own.
final class Channel: Sendable {
    /// Replies and events may be large (a snapshot of many accessories): accept long lines from the daemon.
    private static let maximumIncomingLine = 64 << 20

    private typealias Reply = CheckedContinuation<Result<ServerMessage, AccmonError>, Never>
    private struct State {
        var nextRequestID: Int64 = 1
        var pending: [Int64: Reply] = [:]
        var pushes: AsyncThrowingStream<Push, any Error>.Continuation?
        /// Connections the subscription knows as connected, for disconnect handlers.
        var connected: Set<ConnectionID> = []
        var disconnectHandlers: [ConnectionID: [@Sendable (Accessory) -> Void]] = [:]
        var closedByUser = false
        var endWaiters: [CheckedContinuation<Void, Never>] = []
        var ended: AccmonError?
    }

    private let descriptor: FileDescriptor
    private let state = Mutex(State())
    private let writeLock = Mutex(())

    init(descriptor: FileDescriptor) {
        self.descriptor = descriptor
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
                    try writeLock.withLock { _ throws(Errno) in try descriptor.sendAll(line) }
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

    /// Opens the stream that events (and a restore's messages) go to; call before sending `subscribe` or a `hello`
    /// with a restore id, so that none can be missed.
    func openPushStream() -> AsyncThrowingStream<Push, any Error> {
        let (stream, continuation) = AsyncThrowingStream<Push, any Error>.makeStream()
        let ended = state.withLock { state -> AccmonError? in
            if state.ended == nil {
                state.pushes?.finish()
                state.pushes = continuation
                state.connected = []
            }
            return state.ended
        }
        if let ended { continuation.finish(throwing: ended) }
        return stream
    }

    /// Finishes the push stream (after `unsubscribe`).
    func finishPushStream(throwing error: AccmonError?) {
        let continuation = state.withLock { state in
            defer {
                state.pushes = nil
                state.disconnectHandlers = [:]
            }
            return state.pushes
        }
        continuation?.finish(throwing: error)
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

    /// Sends a line that expects no reply (an acknowledgement); a failure shows up on the reader thread.
    func send(_ request: ClientRequest) {
        let line = ProtocolCodec().encode(ClientMessage(request))
        _ = try? writeLock.withLock { _ throws(Errno) in try descriptor.sendAll(line) }  // try?: see above
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
        reading: while true {
            let result = buffer.withUnsafeMutableBytes { raw in
                Result { () throws(Errno) -> Int in try descriptor.read(into: raw) }
            }
            guard case .success(let count) = result, count > 0 else {
                if case .failure(let error) = result {
                    endError = AccmonError(.connectionClosed, "accmon: read from accmond: \(error)")
                }
                break
            }
            for item in framer.append(buffer[0..<count]) {
                guard case .line(let line) = item else { continue }  // lines longer than 64 MiB cannot come from accmond
                do throws(ProtocolError) {
                    let message = try codec.decodeServerMessage(line)
                    if case .shutdown(let reason) = message {
                        endError = AccmonError(.daemonStopped, "accmon: accmond stopped: \(reason)")
                        break reading
                    }
                    dispatch(message)
                } catch {
                    endError = AccmonError(
                        .invalidResponse, "accmon: accmond sent an unreadable line: \(error.message)")
                    break reading
                }
            }
        }
        descriptor.close()
        end(endError)
    }

    private func dispatch(_ message: ServerMessage) {
        switch message {
        case .event(let event):
            let handlers = state.withLock { state -> [@Sendable (Accessory) -> Void] in
                let id = event.accessory.connectionID
                switch event.change {
                case .connect:
                    state.connected.insert(id)
                    return []
                case .disconnect:
                    state.connected.remove(id)
                    return state.disconnectHandlers.removeValue(forKey: id) ?? []
                }
            }
            // Handlers first, outside the lock (they may call onDisconnect): as documented, a disconnect handler has
            // run by the time the event reaches the consumer.
            for handler in handlers { handler(event.accessory) }
            state.withLock { _ = $0.pushes?.yield(.event(event)) }
        case .restore(let restored):
            state.withLock { state in
                state.connected = Set(restored.accessories.map(\.connectionID))
                state.pushes?.yield(.restore(restored))
            }
        case .restored(let sequence):
            state.withLock { _ = $0.pushes?.yield(.restored(sequence)) }
        case .error(nil, let error):
            // An error not tied to a request (the daemon could not read a line of ours): it ends the stream.
            finishPushStream(
                throwing: AccmonError(
                    .requestFailed, "accmon: accmond: \(error.message) (\(error.code))", protocolError: error))
        default:
            guard case .number(let id)? = message.requestID else { return }
            let reply = state.withLock { state -> Reply? in
                if case .snapshot(_, let snapshot) = message {
                    state.connected = Set(snapshot.accessories.map(\.connectionID))
                }
                return state.pending.removeValue(forKey: id)
            }
            reply?.resume(returning: .success(message))
        }
    }

    private func end(_ error: AccmonError) {
        let (pending, pushes, closedByUser, waiters) = state.withLock { state in
            state.ended =
                state.closedByUser ? AccmonError(.connectionClosed, "accmon: the connection was closed") : error
            defer {
                state.pending = [:]
                state.pushes = nil
                state.disconnectHandlers = [:]
            }
            defer { state.endWaiters = [] }
            return (state.pending, state.pushes, state.closedByUser, state.endWaiters)
        }
        let failure = closedByUser ? AccmonError(.connectionClosed, "accmon: the connection was closed") : error
        for reply in pending.values { reply.resume(returning: .failure(failure)) }
        pushes?.finish(throwing: closedByUser ? nil : error)
        for waiter in waiters { waiter.resume() }
    }
}

/// What the daemon pushes without a request: events, and on restore the handed-back state and its end marker.
enum Push: Sendable {
    case event(AccessoryEvent)
    case restore(RestoreState)
    case restored(UInt64)
}

extension ServerMessage {
    /// The request id a reply echoes.
    var requestID: RequestID? {
        switch self {
        case .hello(let id, _, _, _, _), .snapshot(let id, _), .list(let id, _), .status(let id, _), .ok(let id, _),
            .error(let id, _):
            id
        case .event, .shutdown, .restore, .restored: nil
        }
    }
}
