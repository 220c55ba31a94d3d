import AccmonSys
import FoundationEssentials
import Glibc

/// accmond's side of the helper `accmon-nodes`: a blocking client of its socket (``NodeHelperProtocol``), one
/// request at a time.
///
/// It connects on the first call, and again after a failure: a helper that restarted (it is socket-activated, and
/// keeps its records in `/run/accmon-nodes`) is reached again without the caller doing anything; a request whose
/// send fails on a connection that worked before (the helper restarted since) is sent again on a new one. A call
/// that cannot be sent, or whose reply does not come within ``timeout``, fails with `unavailable`; whether the
/// helper acted is then unknown, and `held` tells.
///
/// - Important: not thread-safe, and every call blocks up to ``timeout``: use it from one thread of its own.
public final class NodeHelperLink: NodeControl {
    /// The helper's socket (`/run/accmon-nodes.sock`).
    public let socketPath: String
    /// How long a call waits for its reply.
    public let timeout: Duration
    private var connection: FileDescriptor?
    private var buffer: [UInt8] = []
    private var nextID: UInt64 = 1
    /// The connections made so far: a caller that sees it grow knows it talks to a helper that may have restarted.
    public private(set) var connections = 0

    public init(socketPath: String, timeout: Duration = .seconds(10)) {
        self.socketPath = socketPath
        self.timeout = timeout
    }

    deinit { connection?.close() }

    /// Closes the connection; the next call opens another.
    public func close() {
        connection?.close()
        connection = nil
        buffer = []
    }

    public func hold(_ path: String, holder: NodeHolder) throws(NodeError) -> HoldOutcome {
        try value(\.hold, call(.hold, path: path, holder: holder), path)
    }

    public func release(_ path: String) throws(NodeError) -> ReleaseOutcome {
        try value(\.release, call(.release, path: path), path)
    }

    public func releaseAll() throws(NodeError) -> [ReleaseResult] {
        try value(\.results, call(.releaseAll), "release-all")
    }

    public func openers(of path: String) throws(NodeError) -> [NodeOpener] {
        try value(\.openers, call(.openers, path: path), path)
    }

    public func cut(_ path: String) throws(NodeError) -> CutOutcome {
        try value(\.cut, call(.cut, path: path), path)
    }

    public func markPort(_ port: String) throws(NodeError) {
        _ = try call(.markPort, port: port)
    }

    @discardableResult
    public func unmarkPort(_ port: String) throws(NodeError) -> [String] {
        try value(\.triggered, call(.unmarkPort, port: port), port)
    }

    public func held() throws(NodeError) -> HeldState {
        try value(\.held, call(.held), "held")
    }

    private func value<Value>(
        _ part: KeyPath<NodeReply, Value?>, _ reply: NodeReply, _ object: String
    ) throws(NodeError)
        -> Value
    {
        guard let value = reply[keyPath: part] else {
            throw NodeError(.unavailable, "accmon-nodes", socketPath, "a reply without its result (for \(object))")
        }
        return value
    }

    /// Sends one request and waits for its reply; a reply with `ok: false` is thrown as its error.
    private func call(
        _ op: NodeRequest.Operation, path: String? = nil, holder: NodeHolder? = nil, port: String? = nil
    ) throws(NodeError) -> NodeReply {
        let request = NodeRequest(id: nextID, op: op, path: path, holder: holder, port: port)
        nextID += 1
        let reply: NodeReply
        do throws(NodeError) {
            let reused = connection != nil
            var fd = try connected()
            do throws(Errno) {
                try fd.sendAll(request.line)
            } catch {
                // A helper that refuses a client says why and closes at once: its reply may be here already.
                if !reused, let refusal = try? readReply(to: request.id, on: fd, within: .zero) {  // try?: none
                    throw refusal.error ?? unavailable("send: \(error)")
                }
                // A connection that was fine before and fails on send (EPIPE): the helper restarted since. The
                // request never reached it: send it on a new connection, once.
                guard reused else { throw unavailable("send: \(error)") }
                close()
                fd = try connected()
                do throws(Errno) {
                    try fd.sendAll(request.line)
                } catch {
                    throw unavailable("send: \(error)")
                }
            }
            reply = try readReply(to: request.id, on: fd, within: timeout)
        } catch {
            close()
            throw error
        }
        if !reply.ok {
            throw reply.error ?? NodeError(.unavailable, "accmon-nodes", socketPath, "a failure without an error")
        }
        return reply
    }

    private func connected() throws(NodeError) -> FileDescriptor {
        if let connection { return connection }
        do throws(SocketError) {
            let fd = try UnixSocket.connect(path: socketPath)
            connection = fd
            connections += 1
            return fd
        } catch {
            let hint = error.errno == .permissionDenied ? " (only accmond's user may connect)" : ""
            throw unavailable("connect: \(error.errno)\(hint)")
        }
    }

    private func readReply(to id: UInt64, on fd: FileDescriptor, within limit: Duration) throws(NodeError) -> NodeReply
    {
        let clock = ContinuousClock()
        let deadline = clock.now + limit
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = buffer[..<newline]
                buffer.removeSubrange(...newline)
                let reply: NodeReply
                do {
                    reply = try JSONDecoder().decode(NodeReply.self, from: Data(line))
                } catch {
                    throw unavailable("a reply that is not the protocol's: \(error)")
                }
                guard reply.v == NodeHelperProtocol.version else {
                    throw unavailable("protocol version \(reply.v), not \(NodeHelperProtocol.version)")
                }
                // A reply with no id answers a line the helper could not read: this one.
                guard reply.id == id || reply.id == nil else {
                    throw unavailable("a reply to request \(reply.id.map(String.init) ?? "?"), not \(id)")
                }
                return reply
            }
            guard buffer.count <= NodeHelperProtocol.maximumReplyBytes else {
                throw unavailable("a reply longer than \(NodeHelperProtocol.maximumReplyBytes) bytes")
            }
            let left = deadline - clock.now
            guard left > .zero || limit == .zero else { throw unavailable("no reply within \(limit)") }
            let (seconds, attoseconds) = left.components
            let milliseconds =
                limit == .zero ? 0 : Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
            var chunk = [UInt8](repeating: 0, count: 65_536)
            var count = 0
            do throws(Errno) {
                guard try waitForReadable([fd], timeoutMilliseconds: milliseconds).ready[0] else {
                    if limit == .zero { throw Errno.wouldBlock }
                    continue
                }
                var failure: Errno?
                chunk.withUnsafeMutableBytes { raw in
                    do throws(Errno) { count = try fd.receive(into: raw) } catch { failure = error }
                }
                if let failure { throw failure }
            } catch {
                throw unavailable("read: \(error)")
            }
            guard count > 0 else { throw unavailable("the helper closed the connection") }
            buffer += chunk[..<count]
        }
    }

    private func unavailable(_ reason: String) -> NodeError {
        NodeError(.unavailable, "accmon-nodes", socketPath, reason)
    }
}
