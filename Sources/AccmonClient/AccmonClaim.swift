@_exported public import AccmonProtocol
import Synchronization

/// Accessories checked out for exclusive use through a connection: while the claim holds, their device nodes open for
/// its user and root only (docs/CLAIMS.md).
///
/// ```swift
/// let claim = try await connection.claim(.matching(AccessoryFilter(kind: .serial), serial: nil, count: 1),
///                                        wait: true, reason: "flashing")
/// let port = claim.deviceNodes.first!
/// Task { for await notice in claim.notices { print(notice.kind, notice.by?.description ?? "") } }
/// // ... use the port ...
/// try await claim.release()
/// ```
///
/// The claim lives as long as this object and its connection: it is released when ``release()`` is called, when the
/// object is deinitialised, or when the connection ends (unless it was asked to be kept with a preserved session).
public final class AccmonClaim: Sendable {
    /// The claim's id, such as `c-3`.
    public let claimID: String
    /// The secret that takes the claim up again from another connection after a restart of the daemon
    /// (``AccmonConnection/claim(_:wait:reason:maxSeconds:preserve:whileWaiting:)`` with ``ClaimRequest/Target/resume(token:)``).
    public let token: String
    /// What happens to the claim: contention, a break, its accessory going and coming back. Finishes when the claim is
    /// released or the connection ends.
    public let notices: AsyncStream<ClaimNotice>
    private let current: Current
    private let channel: Channel

    /// The claim's latest description and whether it was released, shared with the task that follows its notices.
    private final class Current: Sendable {
        let state: Mutex<(info: ClaimInfo, released: Bool)>
        init(_ info: ClaimInfo) { state = Mutex((info, false)) }
    }

    init(info: ClaimInfo, notices: AsyncStream<ClaimNotice>, channel: Channel) {
        claimID = info.claimID
        token = info.token
        self.channel = channel
        let current = Current(info)
        self.current = current
        // Follow the notices that change what is held, and pass every notice on.
        let (stream, continuation) = AsyncStream<ClaimNotice>.makeStream()
        self.notices = stream
        Task {
            for await notice in notices {
                if let updated = notice.claim { current.state.withLock { $0.info = updated } }
                continuation.yield(notice)
            }
            continuation.finish()
        }
    }

    deinit {
        let released = current.state.withLock { $0.released }
        if !released { channel.send(.release(ReleaseRequest(.claim(claimID)))) }
        channel.forgetClaim(claimID)
    }

    /// The claim as the daemon last described it: what it holds (new connections after a re-enumeration), its nodes.
    public var info: ClaimInfo { current.state.withLock { $0.info } }
    /// The accessories held.
    public var accessories: [Accessory] { info.accessories }
    /// Every device node of the accessories held, in order.
    public var deviceNodes: [String] { info.accessories.flatMap(\.deviceNodes) }

    /// Releases the claim: the nodes are as they were, and the next claimer in line gets the accessories.
    public func release() async throws(AccmonError) {
        let wasReleased = current.state.withLock { state in
            defer { state.released = true }
            return state.released
        }
        guard !wasReleased else { return }
        defer { channel.forgetClaim(claimID) }
        _ = try await channel.request(.release(ReleaseRequest(.claim(claimID))))
    }
}

extension AccmonConnection {
    /// Claims accessories for exclusive use (PROTOCOL §7.12): all of `target` or none.
    ///
    /// - Parameters:
    ///   - target: connections by id, or a number of accessories matching a filter (and a serial number).
    ///   - wait: when what is asked for is held, wait in line (first come, first served) instead of failing. Cancel
    ///     the task to stop waiting.
    ///   - reason: why, shown to the holder and to everyone who sees the claim.
    ///   - maxSeconds: the longest the claim may last (the manifest may cap it).
    ///   - preserve: keep the claim, for a grace period, while this connection's session is preserved for its restore
    ///     id (``AccmonSession``).
    ///   - whileWaiting: called once when the claim waits in line, with its place and who holds what it asked for.
    /// - Throws: ``AccmonError`` with ``AccmonError/Code/requestFailed``: `claim-conflict` (the holders in
    ///   ``ProtocolError/holders``), `permission-denied`, `no-such-connection`, `no-match`, `enforcement-failed`;
    ///   with ``AccmonError/Code/connectionClosed`` and ``AccmonError/claimToken`` when the connection ended while
    ///   the claim waited in line (a restart of accmond): take the place up again with `.resume(token:)`.
    public func claim(
        _ target: ClaimRequest.Target, wait: Bool = false, reason: String = "", maxSeconds: Double? = nil,
        preserve: Bool = false, whileWaiting: (@Sendable (ClaimInfo) -> Void)? = nil
    ) async throws(AccmonError) -> AccmonClaim {
        let request = ClaimRequest(target, wait: wait, reason: reason, maxSeconds: maxSeconds, preserve: preserve)
        guard case .claim(_, let info) = try await channel.request(.claim(request)) else {
            throw AccmonError(.invalidResponse, "accmon: claim: unexpected reply from accmond")
        }
        let notices = channel.claimNotices(info.claimID)
        guard info.state == .waiting else { return AccmonClaim(info: info, notices: notices, channel: channel) }
        whileWaiting?(info)
        let channel = channel
        let outcome: Result<ClaimInfo, AccmonError> = await withTaskCancellationHandler {
            for await notice in notices {
                switch notice.kind {
                case .granted: if let granted = notice.claim { return .success(granted) }
                case .cancelled:
                    return .failure(
                        AccmonError(
                            .requestFailed, "accmon: claim: \(info.claimID): cancelled: \(notice.reason ?? "")"))
                default: continue
                }
            }
            return .failure(
                AccmonError(
                    .connectionClosed,
                    "accmon: claim: \(info.claimID): the connection ended while waiting (take the place up again with "
                        + "its token)", claimToken: info.token))
        } onCancel: {
            channel.send(.release(ReleaseRequest(.claim(info.claimID))))
            channel.forgetClaim(info.claimID)
        }
        let granted = try outcome.get()
        // The rest of the notices: the waiting stream was consumed, so register again.
        return AccmonClaim(info: granted, notices: channel.claimNotices(granted.claimID), channel: channel)
    }

    /// The claims and waiters on the accessories this client sees.
    public func claims() async throws(AccmonError) -> ClaimList {
        guard case .claims(_, let list) = try await channel.request(.claims) else {
            throw AccmonError(.invalidResponse, "accmon: claims: unexpected reply from accmond")
        }
        return list
    }

    /// Releases a claim by id, connection or accessory; with `force` (root and the manifest's admins), breaks
    /// another's claim, telling its holder `reason`.
    public func release(
        _ target: ReleaseRequest.Target, force: Bool = false, reason: String = ""
    ) async throws(AccmonError) {
        _ = try await channel.request(.release(ReleaseRequest(target, force: force, reason: reason)))
    }
}
