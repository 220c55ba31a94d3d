public import AccmonSys

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
    public var socketPath: String { link.socketPath }
    /// How long a call waits for its reply.
    public var timeout: Duration { link.timeout }
    /// The connections made so far: a caller that sees it grow knows it talks to a helper that may have restarted.
    public var connections: Int { link.connections }
    private let link: LineLink
    private var nextID: UInt64 = 1

    public init(socketPath: String, timeout: Duration = .seconds(10)) {
        link = LineLink(
            socketPath: socketPath, timeout: timeout, peer: "accmon-nodes",
            maximumReplyBytes: NodeHelperProtocol.maximumReplyBytes)
    }

    /// Closes the connection; the next call opens another.
    public func close() { link.close() }

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

    public func unclaimedState(of path: String) throws(NodeError) -> NodeState {
        try value(\.state, call(.state, path: path), path)
    }

    public func openForIO(_ path: String, readOnly: Bool) throws(NodeError) -> FileDescriptor {
        _ = try value(\.open, call(.openForIO, path: path, readOnly: readOnly), path)
        guard let descriptor = link.takeDescriptor() else {
            throw link.unavailable("open: the reply came without the node's descriptor")
        }
        return descriptor
    }

    private func value<Value>(
        _ part: KeyPath<NodeReply, Value?>, _ reply: NodeReply, _ object: String
    ) throws(NodeError)
        -> Value
    {
        guard let value = reply[keyPath: part] else {
            throw link.unavailable("a reply without its result (for \(object))")
        }
        return value
    }

    /// Sends one request and waits for its reply; a reply with `ok: false` is thrown as its error.
    private func call(
        _ op: NodeRequest.Operation, path: String? = nil, holder: NodeHolder? = nil, port: String? = nil,
        readOnly: Bool? = nil
    ) throws(NodeError) -> NodeReply {
        let request = NodeRequest(id: nextID, op: op, path: path, holder: holder, port: port, readOnly: readOnly)
        nextID += 1
        let reply = try link.call(request.line, id: request.id, version: NodeHelperProtocol.version, as: NodeReply.self)
        if !reply.ok { throw reply.error ?? link.unavailable("a failure without an error") }
        return reply
    }
}
