@_exported public import AccmonProtocol
import AccmonSys
import Glibc
import Synchronization

/// A connection to accmond.
///
/// ```swift
/// let connection = try await AccmonConnection.connect(clientName: "my-app")
/// let subscription = try await connection.subscribe(AccessoryFilter(kind: .serial))
/// for accessory in subscription.snapshot.accessories { print("present:", accessory.name) }
/// for try await event in subscription { print(event.change, event.accessory.name) }
/// ```
///
/// The connection reads the socket on a thread of its own, so no blocking call runs on Swift's cooperative pool.
/// One connection carries at most one subscription at a time.
public final class AccmonConnection: Sendable {
    /// The socket path used.
    public let socketPath: String
    /// The session id the daemon gave this connection.
    public let sessionID: String
    /// The negotiated protocol version.
    public let protocolVersion: Int
    /// The daemon's version.
    public let daemonVersion: String
    /// Whether the daemon handed back a preserved session for the restore id given to ``connect(socketPath:clientName:)``'s
    /// sibling used by ``AccmonSession``.
    let restored: Bool
    /// For a connection with a restore id: the pushes, opened before `hello` so that the restore is not missed.
    let restorePushes: AsyncThrowingStream<Push, any Error>?

    let channel: Channel

    private init(
        socketPath: String, channel: Channel, hello: (version: Int, daemon: String, session: String, restored: Bool),
        restorePushes: AsyncThrowingStream<Push, any Error>?
    ) {
        self.socketPath = socketPath
        self.channel = channel
        self.protocolVersion = hello.version
        self.daemonVersion = hello.daemon
        self.sessionID = hello.session
        self.restored = hello.restored
        self.restorePushes = restorePushes
    }

    /// The socket path a client uses: `explicitPath`, else `$ACCMON_SOCKET`, else `/run/accmon/accmon.sock`.
    public static func resolveSocketPath(_ explicitPath: String? = nil) -> String {
        if let explicitPath, !explicitPath.isEmpty { return explicitPath }
        if let fromEnvironment = environmentValue(WireFormat.socketEnvironmentVariable), !fromEnvironment.isEmpty {
            return fromEnvironment
        }
        return WireFormat.defaultSocketPath
    }

    /// Connects to accmond and negotiates the protocol version.
    ///
    /// - Parameters:
    ///   - socketPath: the socket; `nil` uses ``resolveSocketPath(_:)``.
    ///   - clientName: a name for the daemon's logs and status.
    /// - Throws: ``AccmonError`` with ``AccmonError/Code/daemonUnavailable`` when nothing listens (is accmond
    ///   running?), ``AccmonError/Code/permissionDenied`` when the socket's permissions refuse this user.
    public static func connect(
        socketPath: String? = nil, clientName: String
    ) async throws(AccmonError)
        -> AccmonConnection
    {
        try await connect(socketPath: socketPath, clientName: clientName, restoreID: nil)
    }

    /// Connects, registering `restoreID` when given, and `relaunch` with it (see ``AccmonSession``).
    static func connect(
        socketPath: String?, clientName: String, restoreID: String?, relaunch: String? = nil
    ) async throws(AccmonError)
        -> AccmonConnection
    {
        let path = resolveSocketPath(socketPath)
        let descriptor: FileDescriptor
        do {
            descriptor = try UnixSocket.connect(path: path)
        } catch {
            throw connectError(error, path: path)
        }
        let channel: Channel
        do {
            channel = try Channel(descriptor: descriptor)
            try channel.startReading()
        } catch {
            descriptor.close()
            throw AccmonError(.connectionClosed, "accmon: cannot start the reader thread: \(error)")
        }
        let restorePushes = restoreID.map { _ in channel.openPushStream() }
        let reply: ServerMessage
        do {
            reply = try await channel.request(
                .hello(
                    versions: Array(WireFormat.supportedVersions), clientName: clientName, restoreID: restoreID,
                    relaunch: relaunch))
        } catch {
            channel.close()
            throw error
        }
        guard case .hello(_, let version, let daemonVersion, let sessionID, let restored) = reply else {
            channel.close()
            throw AccmonError(.invalidResponse, "accmon: hello: unexpected reply from accmond")
        }
        return AccmonConnection(
            socketPath: path, channel: channel, hello: (version, daemonVersion, sessionID, restored),
            restorePushes: restorePushes)
    }

    private static func connectError(_ error: SocketError, path: String) -> AccmonError {
        switch error.errno {
        case .permissionDenied, .notPermitted:
            return AccmonError(
                .permissionDenied,
                "accmon: cannot connect to '\(path)': \(error.errno); is this user in the 'accmon' group?")
        default:
            return AccmonError(
                .daemonUnavailable,
                "accmon: cannot connect to '\(path)': \(error.errno); is accmond running? "
                    + "(`systemctl status accmond`, or set \(WireFormat.socketEnvironmentVariable))")
        }
    }

    /// Subscribes on a connection whose push stream is already open (one with a restore id).
    func subscribe(
        _ filter: AccessoryFilter, pushes: AsyncThrowingStream<Push, any Error>
    ) async throws(AccmonError)
        -> Snapshot
    {
        guard case .snapshot(_, let snapshot) = try await channel.request(.subscribe(filter)) else {
            throw AccmonError(.invalidResponse, "accmon: subscribe: unexpected reply from accmond")
        }
        return snapshot
    }

    /// Subscribes: returns the snapshot of connected accessories that match `filter`, then yields live events.
    ///
    /// No accessory is missing from or repeated between the snapshot and the events.
    /// - Throws: ``AccmonError`` when the daemon refuses (for example when already subscribed) or is gone.
    /// - Parameters:
    ///   - filter: which accessories.
    ///   - includeRejected: also the accessories the manifest rejected, each event of one carrying the reason
    ///     (``AccessoryEvent/rejection``); for root and the manifest's admins only.
    public func subscribe(
        _ filter: AccessoryFilter = .all, includeRejected: Bool = false
    ) async throws(AccmonError)
        -> AccessorySubscription
    {
        let pushes = channel.openPushStream()
        let reply = try await channel.request(.subscribe(filter, includeRejected: includeRejected))
        guard case .snapshot(_, let snapshot) = reply else {
            throw AccmonError(.invalidResponse, "accmon: subscribe: unexpected reply from accmond")
        }
        return AccessorySubscription(snapshot: snapshot, pushes: pushes, channel: channel)
    }

    /// Subscribes, handing the snapshot and then each live event to `handler` on the connection's reader thread.
    ///
    /// This is the low-latency form of ``subscribe(_:includeRejected:)``, after NotificationCenter's
    /// `addObserver(forName:object:queue:using:)` with no queue: each event reaches the handler on the thread that
    /// read it from the socket, with no hop to another thread. The handler's first update is the snapshot, then come
    /// the events in order; no accessory is missing from or repeated between them. The snapshot reaches the handler
    /// before this method returns.
    ///
    /// ```swift
    /// let observation = try await connection.subscribe(AccessoryFilter(kind: .serial)) { update in
    ///     switch update {
    ///     case .snapshot(let snapshot): model.replace(with: snapshot.accessories)
    ///     case .event(let event): model.apply(event)
    ///     }
    /// }
    /// try await observation.waitForEnd()
    /// ```
    ///
    /// - Important: The handler runs on the connection's reader thread, one update at a time: while it runs, nothing
    ///   else of this connection is read, replies to requests included. Keep it short, never block in it, and never
    ///   wait in it for a request on the same connection.
    /// - Parameters:
    ///   - filter: which accessories.
    ///   - includeRejected: also the accessories the manifest rejected, as in ``subscribe(_:includeRejected:)``.
    ///   - handler: gets the snapshot, then each event.
    /// - Returns: the subscription, to register disconnect handlers and to wait for its end.
    /// - Throws: ``AccmonError`` when the daemon refuses (for example when already subscribed) or is gone.
    public func subscribe(
        _ filter: AccessoryFilter = .all, includeRejected: Bool = false,
        onUpdate handler: @escaping @Sendable (SubscriptionUpdate) -> Void
    ) async throws(AccmonError) -> AccessoryObservation {
        try await subscribe(filter, includeRejected: includeRejected, onUpdate: { update, _ in handler(update) })
    }

    /// Subscribes like ``subscribe(_:includeRejected:onUpdate:)``, with claims: the snapshot carries the claim on each
    /// claimed accessory (``Snapshot/claims``), and `onClaimUpdate` gets every change of a claim on an accessory the
    /// client sees (claimed, released, a new holder), on the reader thread, in order with the events.
    public func subscribe(
        _ filter: AccessoryFilter = .all, includeRejected: Bool = false,
        onUpdate handler: @escaping @Sendable (SubscriptionUpdate) -> Void,
        onClaimUpdate: @escaping @Sendable (ClaimUpdate) -> Void
    ) async throws(AccmonError) -> AccessoryObservation {
        try await subscribe(
            filter, includeRejected: includeRejected, onUpdate: { update, _ in handler(update) },
            onClaimUpdate: onClaimUpdate)
    }

    /// Subscribes like ``subscribe(_:includeRejected:onUpdate:)``, also handing the handler each event's line as the
    /// daemon wrote it (without its newline) and calling `afterRead` once the updates from one read of the socket have
    /// been handed over, so that a consumer can write the output of several events at once (`accmon watch`).
    package func subscribe(
        _ filter: AccessoryFilter, includeRejected: Bool,
        onUpdate handler: @escaping @Sendable (SubscriptionUpdate, _ eventLine: [UInt8]) -> Void,
        afterRead: (@Sendable () -> Void)? = nil, onClaimUpdate: (@Sendable (ClaimUpdate) -> Void)? = nil
    ) async throws(AccmonError) -> AccessoryObservation {
        let end = SubscriptionEnd()
        channel.openObserver(
            Channel.Observer(update: handler, afterRead: afterRead, end: end, claimUpdate: onClaimUpdate))
        let reply: ServerMessage
        do {
            reply = try await channel.request(
                .subscribe(filter, includeRejected: includeRejected, claims: onClaimUpdate != nil))
        } catch {
            channel.finishSubscription(throwing: error)
            throw error
        }
        guard case .snapshot(_, let snapshot) = reply else {
            channel.finishSubscription(throwing: nil)
            throw AccmonError(.invalidResponse, "accmon: subscribe: unexpected reply from accmond")
        }
        return AccessoryObservation(snapshot: snapshot, channel: channel, end: end)
    }

    /// An executor that runs tasks on this connection's reader thread, between its reads of the socket.
    ///
    /// A loop over a subscription in a task that prefers it gets each event on the thread that read it, where the
    /// sequence otherwise resumes the loop on Swift's cooperative pool, which costs a wake-up of a pool thread per
    /// event when the machine is idle:
    ///
    /// ```swift
    /// let subscription = try await connection.subscribe()
    /// try await withTaskExecutorPreference(connection.readerExecutor) {
    ///     for try await event in subscription { print(event.change, event.accessory.name) }
    /// }
    /// ```
    ///
    /// The loop must not be isolated to an actor, the main actor included (as top-level code and `@MainActor` types
    /// are): an actor's isolation takes precedence over an executor preference.
    ///
    /// - Important: As with a handler (``subscribe(_:includeRejected:onUpdate:)``), the connection reads nothing
    ///   while such a task runs: keep the work between two awaits short and never block in it. Awaiting a request on
    ///   the same connection is fine. Once the connection has ended, these tasks run on the global executor.
    public var readerExecutor: any TaskExecutor { channel.executor }

    /// Ends the subscription; its event sequence finishes, or its handler gets no more updates.
    public func unsubscribe() async throws(AccmonError) {
        _ = try await channel.request(.unsubscribe)
        channel.finishSubscription(throwing: nil)
    }

    /// Suspends the subscription: the daemon holds events and coalesces them (a connect and disconnect of the same
    /// connection cancel out) until ``resume()``.
    public func suspend() async throws(AccmonError) {
        _ = try await channel.request(.suspend)
    }

    /// Resumes the subscription: what was queued while suspended arrives in order, then live events again.
    public func resume() async throws(AccmonError) {
        _ = try await channel.request(.resume)
    }

    /// A one-shot snapshot of the connected accessories that match `filter`.
    ///
    /// With `includeRejected` (root and the manifest's admins only), the accessories the manifest rejected too, with
    /// the reasons in ``Snapshot/rejected``.
    ///
    /// With `claims`, the claim on each claimed accessory, in ``Snapshot/claims``.
    public func list(
        _ filter: AccessoryFilter = .all, includeRejected: Bool = false, claims: Bool = false
    ) async throws(AccmonError)
        -> Snapshot
    {
        guard
            case .list(_, let snapshot) = try await channel.request(
                .list(filter, includeRejected: includeRejected, claims: claims))
        else {
            throw AccmonError(.invalidResponse, "accmon: list: unexpected reply from accmond")
        }
        return snapshot
    }

    /// The newest history entries this client may see: what happened to the accessories (connects, disconnects,
    /// claims; rejected connects for root and the manifest's admins), oldest first.
    ///
    /// The daemon answers a request with at most about its client buffer's bound of bytes (`truncated`); this asks
    /// again for the older entries (with ``HistoryQuery/before``) until it has `limit` of them or there are no more.
    ///
    /// - Parameters:
    ///   - since: only entries recorded after this time (seconds since the epoch); `nil` for all the daemon keeps.
    ///   - limit: at most this many, the newest (1 to ``HistoryQuery/maximumLimit``).
    ///   - filter: only entries whose accessory passes it.
    public func history(
        since: Double? = nil, limit: Int = HistoryQuery.defaultLimit, filter: AccessoryFilter = .all
    ) async throws(AccmonError) -> [HistoryEntry] {
        var pages: [[HistoryEntry]] = []
        var query = HistoryQuery(since: since, limit: limit, filter: filter)
        while true {
            guard case .history(_, let entries, let truncated) = try await channel.request(.history(query)) else {
                throw AccmonError(.invalidResponse, "accmon: history: unexpected reply from accmond")
            }
            pages.append(entries)
            query.limit -= entries.count
            guard truncated, query.limit > 0, let oldest = entries.first?.seq else { break }
            query.before = oldest
        }
        return pages.reversed().flatMap { $0 }
    }

    /// Asks the daemon to read its manifest again (root and the manifest's admins only).
    ///
    /// - Throws: ``AccmonError`` whose ``AccmonError/protocolError`` has the code `manifest-invalid` and lists every
    ///   problem when the manifest is broken; the previous one then stays in force.
    public func reloadManifest() async throws(AccmonError) {
        _ = try await channel.request(.reloadManifest)
    }

    /// The daemon's status.
    public func status() async throws(AccmonError) -> DaemonStatus {
        guard case .status(_, let status) = try await channel.request(.status) else {
            throw AccmonError(.invalidResponse, "accmon: status: unexpected reply from accmond")
        }
        return status
    }

    /// Plugs in a simulated accessory (accmond must run with `--simulate`); returns its connection id.
    public func simulateConnect(_ accessory: Accessory) async throws(AccmonError) -> ConnectionID {
        guard case .ok(_, let connectionID?) = try await channel.request(.simulateConnect(accessory)) else {
            throw AccmonError(.invalidResponse, "accmon: simulate: accmond did not name the new connection")
        }
        return connectionID
    }

    /// Unplugs a simulated accessory.
    public func simulateDisconnect(_ connectionID: ConnectionID) async throws(AccmonError) {
        _ = try await channel.request(.simulateDisconnect(connectionID))
    }

    /// Closes the connection: pending requests fail and the event sequence finishes. Idempotent.
    public func close() {
        channel.close()
    }
}
