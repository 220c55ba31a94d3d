public import AccmonProtocol

/// A request a claimer publishes on `<prefix>/<host>/claim-requests/<user>` (docs/MQTT.md §12), with an MQTT 5
/// message expiry, a response topic under `claim-replies/<user>/` and correlation data. Who asks is the topic's
/// `<user>` level, never a field of this payload.
public struct RemoteClaimRequest: Codable, Sendable, Hashable {
    public enum Operation: String, Codable, Sendable, Hashable {
        /// Claim accessories of the host: by `connections`, or `count` that match `filter` (and `serial`).
        case claim
        /// Renew the leases of `claimIDs` (one's own claims and places in line on this host).
        case renew
        /// End one's own claim (or place in line) `claimIDs[0]`.
        case release
    }

    public var op: Operation
    /// Unique per request: a request whose nonce the host has seen is ignored (a replay).
    public var nonce: String
    public var connections: [UInt64]?
    public var filter: AccessoryFilter?
    public var serial: String?
    public var count: Int?
    public var wait: Bool?
    public var reason: String?
    public var claimIDs: [String]?

    public init(
        op: Operation, nonce: String, connections: [UInt64]? = nil, filter: AccessoryFilter? = nil,
        serial: String? = nil, count: Int? = nil, wait: Bool? = nil, reason: String? = nil, claimIDs: [String]? = nil
    ) {
        self.op = op
        self.nonce = nonce
        self.connections = connections
        self.filter = filter
        self.serial = serial
        self.count = count
        self.wait = wait
        self.reason = reason
        self.claimIDs = claimIDs
    }
}

/// What a host publishes under `<prefix>/<host>/claim-replies/<user>/`: the reply to a request (with its `nonce` and
/// correlation data) or a notice about one of the user's claims.
public struct RemoteClaimReply: Codable, Sendable, Hashable {
    public enum Kind: String, Codable, Sendable, Hashable {
        /// Replies: a claim held now, or waiting in line; renewed, released; a refused request.
        case held, waiting, renewed, released, error
        /// Notices, as accmond's (PROTOCOL.md §7.13.2), and `lease-expired` (the claimer stopped renewing).
        case granted, contention, broken, returning, returned, lost, expired, cancelled
        case leaseExpired = "lease-expired"
    }

    public var kind: Kind
    public var host: String
    /// The request's nonce, in a reply.
    public var nonce: String?
    public var claimID: String?
    public var accessories: [Accessory]?
    public var nodes: [ClaimedNode]?
    public var position: Int?
    /// For `contention` and `broken`: who; for `error` with `claim-conflict`: the claims in the way.
    public var by: Party?
    public var holders: [ClaimSummary]?
    public var reason: String?
    /// For `error`: the protocol's error code (`claim-conflict`, `permission-denied`, ...) and message.
    public var code: String?
    public var message: String?
    /// For `renewed`: the claim ids this host does not know for the user (ended).
    public var unknown: [String]?
    /// The lease: renew at least every `renewSeconds`; it ends `leaseSeconds` after the last renewal.
    public var renewSeconds: Double?
    public var leaseSeconds: Double?

    public init(kind: Kind, host: String, nonce: String? = nil, claimID: String? = nil) {
        self.kind = kind
        self.host = host
        self.nonce = nonce
        self.claimID = claimID
    }
}

/// The retained payload of `<prefix>/<host>/claims/<accessoryID>/<connectionID>`: the claim that holds it.
public struct RemoteClaimState: Codable, Sendable, Hashable {
    public var host: String
    public var accessoryID: String
    public var connectionID: UInt64
    public var claimID: String
    /// The holder; `holder.remote` tells a remote (MQTT) holder from a local one.
    public var holder: Party
    public var since: Double
    public var reason: String
    public var waiting: Int
    public var state: String

    public init(host: String, accessoryID: String, connectionID: UInt64, summary: ClaimSummary) {
        self.init(
            host: host, connectionID: connectionID,
            claim: FleetClaim(
                claimID: summary.claimID, holder: summary.holder, since: summary.since, reason: summary.reason,
                waiting: summary.waiting, state: summary.state.rawValue, accessoryID: accessoryID))
    }

    /// The claim a fleet read found on `connectionID` of `host` (``FleetState``).
    public init(host: String, connectionID: UInt64, claim: FleetClaim) {
        self.host = host
        accessoryID = claim.accessoryID
        self.connectionID = connectionID
        claimID = claim.claimID
        holder = claim.holder
        since = claim.since
        reason = claim.reason
        waiting = claim.waiting
        state = claim.state
    }
}
