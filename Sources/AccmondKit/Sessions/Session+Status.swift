import AccmonProtocol
import AccmonSys

/// How a session shows itself: in `status`, and in the log's metadata.
extension Session {
    /// The session as `status` shows it.
    func status(now: UInt64) -> SessionStatus {
        SessionStatus(
            sessionID: sessionID, clientName: clientName, pid: peer?.pid ?? 0, uid: peer?.uid ?? 0,
            state: isSuspended ? .suspended : .live,
            suspendedBecause: suspendedByRequest
                ? "requested" : suspendedForLogin ? "inactive-session" : (queue.isEmpty ? "" : queuedBecause.rawValue),
            subscribed: subscription != nil, queuedEvents: queue.count, outboundBytes: outbound.byteCount,
            idleSeconds: Double(now &- lastActivity) / 1e9, transport: busEndpoint == nil ? .socket : .bus)
    }

    /// Log metadata naming the client.
    var metadata: [String: String] {
        var metadata = ["session": sessionID]
        if let peer {
            metadata["client.pid"] = String(peer.pid)
            metadata["client.uid"] = String(peer.uid)
        }
        if !clientName.isEmpty { metadata["client.name"] = clientName }
        if let endpoint = busEndpoint {
            metadata["bus.peer"] = endpoint.peer
            metadata["bus.path"] = endpoint.objectPath
        }
        if let restoreKey { metadata["restore.id"] = restoreKey.restoreID }
        return metadata
    }
}
