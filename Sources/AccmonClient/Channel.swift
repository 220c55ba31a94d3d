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
        var events: AsyncThrowingStream<AccessoryEvent, any Error>.Continuation?
        /// Connections the subscription knows as connected, for disconnect handlers.
        var connected: Set<ConnectionID> = []
        var disconnectHandlers: [ConnectionID: [@Sendable (Accessory) -> Void]] = [:]
        var closedByUser = false
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

    /// Opens the stream that live events go to; call before sending `subscribe`, so none can be missed.
    func openEventStream() -> AsyncThrowingStream<AccessoryEvent, any Error> {
        let (stream, continuation) = AsyncThrowingStream<AccessoryEvent, any Error>.makeStream()
        let ended = state.withLock { state -> AccmonError? in
            if state.ended == nil {
                state.events?.finish()
                state.events = continuation
                state.connected = []
            }
            return state.ended
        }
        if let ended { continuation.finish(throwing: ended) }
        return stream
    }

    /// Finishes the event stream (after `unsubscribe`).
    func finishEventStream(throwing error: AccmonError?) {
        let continuation = state.withLock { state in
            defer {
                state.events = nil
                state.disconnectHandlers = [:]
            }
            return state.events
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
                    endError = AccmonError(.invalidResponse, "accmon: accmond sent an unreadable line: \(error.message)")
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
            state.withLock { $0.events?.yield(event) }
        case .error(nil, let error):
            // An error not tied to a request (the daemon could not read a line of ours): it ends the stream.
            finishEventStream(
                throwing: AccmonError(.requestFailed, "accmon: accmond: \(error.message) (\(error.code))", protocolError: error))
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
        let (pending, events, closedByUser) = state.withLock { state in
            state.ended = state.closedByUser ? AccmonError(.connectionClosed, "accmon: the connection was closed") : error
            defer {
                state.pending = [:]
                state.events = nil
                state.disconnectHandlers = [:]
            }
            return (state.pending, state.events, state.closedByUser)
        }
        let failure = closedByUser ? AccmonError(.connectionClosed, "accmon: the connection was closed") : error
        for reply in pending.values { reply.resume(returning: .failure(failure)) }
        events?.finish(throwing: closedByUser ? nil : error)
    }
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
