/// A client's correlation id for a request, echoed in the daemon's reply: a JSON string or integer.
public enum RequestID: Codable, Sendable, Hashable, CustomStringConvertible {
    case number(Int64)
    case string(String)

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let number = try? container.decode(Int64.self) {  // try?: fall through to the string form
            self = .number(number)
        } else {
            do {
                self = .string(try container.decode(String.self))
            } catch DecodingError.typeMismatch(_, let context) {
                throw DecodingError.typeMismatch(
                    RequestID.self,
                    .init(codingPath: context.codingPath, debugDescription: "expected a string or a 64-bit integer"))
            }
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .number(let number): try container.encode(number)
        case .string(let string): try container.encode(string)
        }
    }

    public var description: String {
        switch self {
        case .number(let number): String(number)
        case .string(let string): string
        }
    }
}

/// What a client asks of the daemon.
public enum ClientRequest: Sendable, Hashable {
    /// Negotiates the protocol version and names the client.
    ///
    /// With a `restoreID`, the daemon preserves the session when the connection ends and hands it back to the next
    /// connection of the same user that says hello with the same id. With `relaunch` too (a systemd template such as
    /// `accmon-viewer@.service`, which the manifest lets this user register), the daemon starts the template's
    /// instance for the user's uid when an event is recorded for the preserved session (docs/SESSIONS.md).
    case hello(versions: [Int], clientName: String, restoreID: String? = nil, relaunch: String? = nil)
    /// Asks for a snapshot of the matching accessories, then live events; with `includeRejected` (admins only),
    /// accessories the manifest rejected too; with `claims`, each accessory's claim and `claim-update` messages.
    case subscribe(AccessoryFilter, includeRejected: Bool = false, claims: Bool = false)
    /// Stops live events.
    case unsubscribe
    /// Asks the daemon to hold live events: they are queued and coalesced until `resume`.
    case suspend
    /// Delivers what was queued while suspended, then live events again.
    case resume
    /// Acknowledges that the app has consumed every event up to this sequence number (no reply).
    case acknowledge(UInt64)
    /// Asks for a one-shot snapshot; with `includeRejected` (admins only), of rejected accessories too; with `claims`,
    /// each accessory's claim.
    case list(AccessoryFilter, includeRejected: Bool = false, claims: Bool = false)
    /// Asks the daemon to read the manifest again (admins only).
    case reloadManifest
    /// Asks for the daemon's status.
    case status
    /// Asks for the newest history entries this client may see (``HistoryQuery``), oldest first.
    case history(HistoryQuery)
    /// Makes the simulated source connect an accessory (daemon started with `--simulate` only).
    case simulateConnect(Accessory)
    /// Makes the simulated source disconnect a connection.
    case simulateDisconnect(ConnectionID)
    /// Checks accessories out for exclusive use, or waits in line for them.
    case claim(ClaimRequest)
    /// Ends a claim (or leaves the line); with `force`, an admin breaks another's claim.
    case release(ReleaseRequest)
    /// Asks for the claims and waiters on the accessories the client sees.
    case claims

    /// The wire name of the request's `type`.
    public var typeName: String {
        switch self {
        case .hello: "hello"
        case .subscribe: "subscribe"
        case .unsubscribe: "unsubscribe"
        case .suspend: "suspend"
        case .acknowledge: "ack"
        case .resume: "resume"
        case .list: "list"
        case .status: "status"
        case .reloadManifest: "reload"
        case .history: "history"
        case .simulateConnect, .simulateDisconnect: "simulate"
        case .claim: "claim"
        case .release: "release"
        case .claims: "claims"
        }
    }
}

/// One line a client sends: a request and its optional correlation id.
public struct ClientMessage: Sendable, Hashable {
    /// The correlation id, echoed in the reply.
    public var id: RequestID?
    /// The request.
    public var request: ClientRequest

    /// Creates a message.
    public init(id: RequestID? = nil, _ request: ClientRequest) {
        self.id = id
        self.request = request
    }
}

/// A snapshot of connected accessories, current as of a sequence number.
public struct Snapshot: Sendable, Hashable {
    /// The sequence number of the last event reflected in the snapshot; live events that follow have higher numbers.
    public var sequence: UInt64
    /// The connected accessories, in connection order.
    public var accessories: [Accessory]
    /// For a snapshot that includes rejected accessories (admins only): why each was rejected, by connection.
    public var rejected: [ConnectionID: String]
    /// For a snapshot asked for with `claims`: the claim on each claimed accessory, by connection (on the wire, the
    /// accessory object's `claim` field).
    public var claims: [ConnectionID: ClaimSummary]

    /// Creates a snapshot.
    public init(
        sequence: UInt64, accessories: [Accessory], rejected: [ConnectionID: String] = [:],
        claims: [ConnectionID: ClaimSummary] = [:]
    ) {
        self.sequence = sequence
        self.accessories = accessories
        self.rejected = rejected
        self.claims = claims
    }
}

/// A preserved session handed back to its client.
public struct RestoreState: Sendable, Hashable {
    /// The session's subscription filter.
    public var filter: AccessoryFilter
    /// The last sequence number the client acknowledged; the events that follow are newer.
    public var acknowledged: UInt64
    /// The accessories the client knew as connected as of that acknowledgement.
    public var accessories: [Accessory]

    /// Creates a restore state.
    public init(filter: AccessoryFilter, acknowledged: UInt64, accessories: [Accessory]) {
        self.filter = filter
        self.acknowledged = acknowledged
        self.accessories = accessories
    }
}

/// The daemon's status, the reply to `status`.
public struct DaemonStatus: Codable, Sendable, Hashable {
    /// The daemon's version.
    public var daemonVersion: String
    /// The protocol version of this connection.
    public var protocolVersion: Int
    /// Seconds since the daemon started.
    public var uptimeSeconds: Double
    /// Accessories connected now.
    public var connectedAccessories: Int
    /// Client connections open now.
    public var sessions: Int
    /// The last sequence number issued.
    public var sequence: UInt64
    /// Whether the simulated event source is enabled.
    public var simulate: Bool
    /// Each client session (for an ordinary user: only their own, at most 100).
    public var clients: [SessionStatus]
    /// Sessions not listed in ``clients`` (an ordinary user's past the first 100); absent when all are.
    public var unlistedClients: Int?
    /// The manifest in force and the outcome of the last attempt to load it; for the manifest's admins only.
    public var manifest: ManifestStatus?
    /// Claims on the accessories this client sees (and its own); absent from daemons without check-out.
    public var claims: Int?
    /// Claim requests waiting in line for them.
    public var claimWaiters: Int?

    /// Creates a status.
    public init(
        daemonVersion: String, protocolVersion: Int, uptimeSeconds: Double, connectedAccessories: Int, sessions: Int,
        sequence: UInt64, simulate: Bool, clients: [SessionStatus] = [], manifest: ManifestStatus? = nil
    ) {
        self.daemonVersion = daemonVersion
        self.protocolVersion = protocolVersion
        self.uptimeSeconds = uptimeSeconds
        self.connectedAccessories = connectedAccessories
        self.sessions = sessions
        self.sequence = sequence
        self.simulate = simulate
        self.clients = clients
        self.unlistedClients = nil
        self.manifest = manifest
    }
}

/// The manifest as `status` shows it.
public struct ManifestStatus: Codable, Sendable, Hashable {
    /// The files of the manifest in force, in merge order.
    public var files: [String]
    /// Its number of entries.
    public var entries: Int
    /// When it was loaded (seconds since the epoch).
    public var loadedAt: Double
    /// The problems of the last load or reload that failed, as `file:line:column: reason`; empty when it succeeded.
    /// After a failed reload the previous manifest stays in force.
    public var lastFailure: [String]
    /// Accessories connected now that the manifest rejects.
    public var rejectedAccessories: Int

    /// Creates a manifest status.
    public init(files: [String], entries: Int, loadedAt: Double, lastFailure: [String], rejectedAccessories: Int) {
        self.files = files
        self.entries = entries
        self.loadedAt = loadedAt
        self.lastFailure = lastFailure
        self.rejectedAccessories = rejectedAccessories
    }
}

/// One client session as `status` shows it.
public struct SessionStatus: Codable, Sendable, Hashable {
    /// Whether events flow to the client or wait in its queue.
    public enum State: String, Codable, Sendable, Hashable {
        /// Events are written as they happen.
        case live
        /// Events are queued and coalesced: the client asked (`suspend`) or stopped reading its socket.
        case suspended
        /// The client went away; the session is kept for its restore id and keeps recording events.
        case preserved
    }

    /// The session id, such as `s-17`.
    public var sessionID: String
    /// The name the client gave in `hello`.
    public var clientName: String
    /// The client's process id (from the socket's peer credentials), or 0 when unknown.
    public var pid: Int32
    /// The client's user id.
    public var uid: UInt32
    /// Live or suspended.
    public var state: State
    /// Why the session is suspended: `requested` (it sent `suspend`) or `not-reading`; empty when live.
    public var suspendedBecause: String
    /// Whether the client is subscribed.
    public var subscribed: Bool
    /// Events waiting in its coalescing queue.
    public var queuedEvents: Int
    /// Bytes written to its socket buffer by the daemon but not yet sent.
    public var outboundBytes: Int
    /// Seconds since the client last sent a request or took bytes from its socket.
    public var idleSeconds: Double
    /// How the client reaches the daemon: the socket, or a subscription on the system bus; absent from daemons
    /// without the bus (then the socket).
    public var transport: Transport?

    /// How a session's client reaches the daemon.
    public enum Transport: String, Codable, Sendable, Hashable {
        /// A connection to the daemon's Unix socket.
        case socket
        /// A subscription object on the system bus (`org.accmon.Accmon1.Manager.Subscribe`).
        case bus
    }

    /// Creates a session status.
    public init(
        sessionID: String, clientName: String, pid: Int32, uid: UInt32, state: State, suspendedBecause: String,
        subscribed: Bool, queuedEvents: Int, outboundBytes: Int, idleSeconds: Double, transport: Transport? = nil
    ) {
        self.transport = transport
        self.sessionID = sessionID
        self.clientName = clientName
        self.pid = pid
        self.uid = uid
        self.state = state
        self.suspendedBecause = suspendedBecause
        self.subscribed = subscribed
        self.queuedEvents = queuedEvents
        self.outboundBytes = outboundBytes
        self.idleSeconds = idleSeconds
    }
}

/// One line the daemon sends.
public enum ServerMessage: Sendable, Hashable {
    /// The reply to `hello`: the negotiated version, the daemon's version and the session id.
    case hello(id: RequestID?, version: Int, daemonVersion: String, sessionID: String, restored: Bool = false)
    /// Sent right after `hello` to a client that got its preserved session back: its subscription and the
    /// accessories it knew as of its last acknowledgement; the events it missed follow, then ``restored(sequence:)``.
    case restore(RestoreState)
    /// Marks the end of what a restored client missed; live events follow.
    case restored(sequence: UInt64)
    /// The reply to `subscribe`: the matching accessories; live events follow.
    case snapshot(id: RequestID?, Snapshot)
    /// The reply to `list`.
    case list(id: RequestID?, Snapshot)
    /// A live connect or disconnect.
    case event(AccessoryEvent)
    /// The reply to `status`.
    case status(id: RequestID?, DaemonStatus)
    /// The reply to `history`: the entries, oldest first; `truncated` when older ones the query asked for did not fit
    /// in one reply (ask again with ``HistoryQuery/before`` set to the first entry's `seq`).
    case history(id: RequestID?, entries: [HistoryEntry], truncated: Bool)
    /// Success of a request with no other reply (`unsubscribe`, `suspend`, `resume`, `simulate`); `simulate connect` names the connection.
    case ok(id: RequestID?, connectionID: ConnectionID?)
    /// A request failed or a line could not be read.
    case error(id: RequestID?, ProtocolError)
    /// The daemon is stopping; the connection closes after this line.
    case shutdown(reason: String)
    /// The reply to `claim`: the claim, held or waiting.
    case claim(id: RequestID?, ClaimInfo)
    /// The reply to `claims`.
    case claims(id: RequestID?, ClaimList)
    /// Sent to a claim's holder, or to a claimer waiting in line, when something happens to its claim.
    case claimNotice(ClaimNotice)
    /// Sent to subscribers that asked for claims when an accessory they see is claimed, released or changes holder.
    case claimUpdate(ClaimUpdate)
}
