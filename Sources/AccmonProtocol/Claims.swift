/// A request to check accessories out for exclusive use (`claim`, docs/PROTOCOL.md §7.12).
public struct ClaimRequest: Sendable, Hashable {
    /// What is claimed.
    public enum Target: Sendable, Hashable {
        /// These connections, all or none.
        case connections([ConnectionID])
        /// `count` accessories that match `filter` (and `serial`, exactly, when given), all or none.
        case matching(AccessoryFilter, serial: String?, count: Int)
        /// The claim or place in line that `token` names, taken up again by a new connection (after a restart of
        /// the daemon or of the client).
        case resume(token: String)
    }

    public var target: Target
    /// Whether to wait in line when what is asked for is held, instead of failing with `claim-conflict`.
    public var wait: Bool
    /// Why, shown to the holder and to everyone who sees the claim; may be empty.
    public var reason: String
    /// The longest the claim may last, in seconds; the manifest may cap it. `nil`: as long as the holder lives.
    public var maxSeconds: Double?
    /// Whether the claim lives on, for a grace period, while the session is preserved for its restore id: the client
    /// comes back with the id and finds its claim.
    public var preserve: Bool
    /// For a bridge (the manifest's `bridges`): the remote (MQTT) user in whose name the claim is made.
    public var remoteUser: String?

    /// The most accessories one claim may name or count.
    public static let maximumCount = 64
    /// The longest reason, in bytes.
    public static let maximumReasonLength = 1024

    public init(
        _ target: Target, wait: Bool = false, reason: String = "", maxSeconds: Double? = nil, preserve: Bool = false,
        remoteUser: String? = nil
    ) {
        self.target = target
        self.wait = wait
        self.reason = reason
        self.maxSeconds = maxSeconds
        self.preserve = preserve
        self.remoteUser = remoteUser
    }
}

/// A request to end a claim (`release`): one's own by claim id, or the claim on a connection or accessory; with
/// `force`, an admin's break of another's claim.
public struct ReleaseRequest: Sendable, Hashable {
    /// What is released.
    public enum Target: Sendable, Hashable {
        case claim(String)
        case connection(ConnectionID)
        case accessory(String)
    }

    public var target: Target
    /// Whether to break another's claim (root and the manifest's admins only).
    public var force: Bool
    /// Why, told to the holder of a broken claim.
    public var reason: String
    /// For a bridge: the remote user in whose name the release is made.
    public var remoteUser: String?

    public init(_ target: Target, force: Bool = false, reason: String = "", remoteUser: String? = nil) {
        self.target = target
        self.force = force
        self.reason = reason
        self.remoteUser = remoteUser
    }
}

/// A claim as everyone who sees its accessories sees it: the `claim` field of an accessory object, an entry of
/// `claims`, the holders named to a claimer who met a conflict.
public struct ClaimSummary: Codable, Sendable, Hashable {
    /// Whether the claim holds its accessories now, or waits for one to come back after its connection ended.
    public enum State: String, Codable, Sendable, Hashable {
        case held
        /// A claimed accessory's connection ended; the claim waits for it to come back (a reset, a bootloader).
        case returning
    }

    /// The claim's id, such as `c-3`.
    public var claimID: String
    public var holder: Party
    /// When it was granted (wall clock, seconds since the epoch).
    public var since: Double
    public var reason: String
    /// Claim requests waiting in line for any of its accessories.
    public var waiting: Int
    public var state: State
    /// The connections it holds now.
    public var connections: [ConnectionID]
    /// The accessory ids it holds (also those of accessories away and expected back).
    public var accessoryIDs: [String]
    /// When it ends at the latest (wall clock), when it has a maximum duration.
    public var expiresAt: Double?

    public init(
        claimID: String, holder: Party, since: Double, reason: String, waiting: Int, state: State = .held,
        connections: [ConnectionID], accessoryIDs: [String], expiresAt: Double? = nil
    ) {
        self.claimID = claimID
        self.holder = holder
        self.since = since
        self.reason = reason
        self.waiting = waiting
        self.state = state
        self.connections = connections
        self.accessoryIDs = accessoryIDs
        self.expiresAt = expiresAt
    }
}

/// A device node of a claimed accessory, as the claim left it.
public struct ClaimedNode: Codable, Sendable, Hashable {
    public var path: String
    /// Whether only the holder and root may open it now.
    public var enforced: Bool
    /// Why it is not enforced (a symbolic link to another node, outside `--simulated-nodes`, ...); `nil` when it is.
    public var note: String?

    public init(path: String, enforced: Bool, note: String? = nil) {
        self.path = path
        self.enforced = enforced
        self.note = note
    }
}

/// A process that had a device node open when a claim began.
public struct NodeOpener: Codable, Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var pid: Int32
    public var uid: UInt32
    /// The uid's name, when accmond knows it.
    public var user: String?
    /// The process's command name.
    public var command: String

    public init(path: String, pid: Int32, uid: UInt32, user: String? = nil, command: String) {
        self.path = path
        self.pid = pid
        self.uid = uid
        self.user = user
        self.command = command
    }

    public var description: String {
        "pid \(pid) (\(command)) of \(user.map { "\($0), uid \(uid)" } ?? "uid \(uid)") has \(path) open"
    }
}

/// A claim as its holder (or the claimer waiting for it) sees it: the reply to `claim`, and the `claim` of a
/// `granted` or `returned` notice.
public struct ClaimInfo: Codable, Sendable, Hashable {
    /// Whether the claim holds its accessories, waits in line for them, or waits for one to come back.
    public enum State: String, Codable, Sendable, Hashable {
        case held
        case waiting
        case returning
    }

    public var claimID: String
    /// The secret that takes the claim up again from another connection (`claim` with `token`), such as after a
    /// restart of the daemon; given only to the claimer.
    public var token: String
    public var state: State
    public var holder: Party
    /// What it holds, as the holder sees the accessories; while waiting, what it waits for (by connection), or none
    /// (by filter).
    public var accessories: [Accessory]
    /// Every device node of the held accessories, and whether the claim is enforced on it.
    public var nodes: [ClaimedNode]
    /// Processes that had a node open when the claim began (they keep their descriptors).
    public var openers: [NodeOpener]
    /// When it was granted, or when it began waiting (wall clock).
    public var since: Double
    public var reason: String
    /// When it ends at the latest (wall clock), when it has a maximum duration.
    public var expiresAt: Double?
    /// While waiting: its place in line (1 is next) among the requests that want the same accessories.
    public var position: Int?
    /// While waiting: the claims that hold what it asked for.
    public var blockers: [ClaimSummary]?

    public init(
        claimID: String, token: String, state: State, holder: Party, accessories: [Accessory],
        nodes: [ClaimedNode] = [], openers: [NodeOpener] = [], since: Double, reason: String,
        expiresAt: Double? = nil, position: Int? = nil, blockers: [ClaimSummary]? = nil
    ) {
        self.claimID = claimID
        self.token = token
        self.state = state
        self.holder = holder
        self.accessories = accessories
        self.nodes = nodes
        self.openers = openers
        self.since = since
        self.reason = reason
        self.expiresAt = expiresAt
        self.position = position
        self.blockers = blockers
    }
}

/// What the daemon tells a claim's holder, or a claimer waiting in line (`claim-notice`).
public struct ClaimNotice: Codable, Sendable, Hashable {
    public enum Kind: String, Codable, Sendable, Hashable, CaseIterable {
        /// A waiting claim was granted: `claim` holds it.
        case granted
        /// Someone asked for what the claim holds: `by`, `reason`.
        case contention
        /// An admin broke the claim: `by`, `reason`. It has ended.
        case broken
        /// A claimed accessory's connection ended: the claim waits for it to come back (`accessory`, the old one).
        case returning
        /// The accessory came back as a new connection, held at once: `claim` has its new connection id and nodes.
        case returned
        /// The accessory did not come back in time: the claim has ended.
        case lost
        /// The claim reached its maximum duration: it has ended.
        case expired
        /// A waiting claim can never be served (what it waits for is gone, or may no longer be claimed): it has ended.
        case cancelled
    }

    public var claimID: String
    public var kind: Kind
    /// When it happened (wall clock).
    public var time: Double
    /// Who acted: the claimer who asked, the admin who broke it.
    public var by: Party?
    public var reason: String?
    /// The claim after the change (`granted`, `returned`).
    public var claim: ClaimInfo?
    /// The accessory concerned (`returning`: the connection that ended; `lost`: the last one known).
    public var accessory: Accessory?

    public init(
        claimID: String, kind: Kind, time: Double, by: Party? = nil, reason: String? = nil, claim: ClaimInfo? = nil,
        accessory: Accessory? = nil
    ) {
        self.claimID = claimID
        self.kind = kind
        self.time = time
        self.by = by
        self.reason = reason
        self.claim = claim
        self.accessory = accessory
    }
}

/// A change of a connection's claim, for subscribers that asked for them (`subscribe` with `claims`): `claim-update`.
public struct ClaimUpdate: Codable, Sendable, Hashable {
    public var connectionID: ConnectionID
    public var accessoryID: String
    /// The claim now; `nil` when the accessory is free.
    public var claim: ClaimSummary?

    public init(connectionID: ConnectionID, accessoryID: String, claim: ClaimSummary?) {
        self.connectionID = connectionID
        self.accessoryID = accessoryID
        self.claim = claim
    }
}

/// A claim request waiting in line, as `claims` lists it.
public struct ClaimWaiter: Codable, Sendable, Hashable {
    public var claimID: String
    public var party: Party
    /// Since when it waits (wall clock).
    public var since: Double
    public var reason: String
    /// The connections it waits for (a claim by connection id); empty for a claim by filter.
    public var connections: [ConnectionID]
    /// For a claim by filter: how many matching accessories it wants.
    public var count: Int
    /// Its place among the waiters, 1 first.
    public var position: Int

    public init(
        claimID: String, party: Party, since: Double, reason: String, connections: [ConnectionID], count: Int,
        position: Int
    ) {
        self.claimID = claimID
        self.party = party
        self.since = since
        self.reason = reason
        self.connections = connections
        self.count = count
        self.position = position
    }
}

/// The reply to `claims`: the claims and waiters on accessories the client sees.
public struct ClaimList: Sendable, Hashable {
    public var claims: [ClaimSummary]
    public var waiters: [ClaimWaiter]

    public init(claims: [ClaimSummary], waiters: [ClaimWaiter]) {
        self.claims = claims
        self.waiters = waiters
    }
}
