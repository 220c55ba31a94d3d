import AccmonManifest
import AccmonProtocol

// The records the claim book keeps and decides on (who claims, what, the claims and the waiters) and the questions
// it asks of the daemon's state. Plain values: saved in the state file as they are (Codable).


/// Who claims: a party as the protocol names it, the credentials that decide what it may claim and open, and where
/// it is now (a live session, or away until a deadline: a preserved session's grace, or a daemon restart's reclaim
/// window).
struct Claimant: Sendable, Hashable, Codable {
    var party: Party
    /// The local user whose credentials decide; for a remote claimer, the bridge's user (who may not open the nodes
    /// unless the manifest maps the remote user to it, issue "check-out across the fleet").
    var principal: ClientPrincipal?
    /// The remote (MQTT) user, for a claim a bridge forwarded.
    var remoteUser: String?
    /// The session that holds the claim or waits; `nil` while away.
    var session: UInt64?
    /// The restore id the session held when it asked to keep the claim while preserved.
    var restoreKey: RestoreKey?
    /// While away: when the claim (or the place in line) is given up (monotonic nanoseconds).
    var awayUntil: UInt64?
    /// For a claim made on the bus (`Accessory.Open`), the peer that made it: after a restart of accmond, a peer still
    /// on the same bus takes its claims up again by itself.
    var bus: BusPeerIdentity? = nil

    /// Whether `other` is the same claimer (the same uid, and the same remote user), as a token's bearer must be.
    func isSameClaimer(as other: Claimant) -> Bool {
        principal?.uid == other.principal?.uid && remoteUser == other.remoteUser
    }
}

/// One accessory a claim holds, followed across re-enumerations: by its accessory id, or by kind and USB port path.
struct ClaimedItem: Sendable, Hashable, Codable {
    var accessoryID: String
    var kind: AccessoryKind
    var portPath: String
    /// The connection held now; `nil` while the accessory is away (its connection ended, it may come back).
    var connection: ConnectionID?
    /// The accessory as last connected.
    var last: Accessory
    /// While away: until when the claim waits for it (monotonic nanoseconds).
    var awayUntil: UInt64?
    /// How long the claim waits for it to come back (the entry's `claim.returnSeconds`).
    var returnSeconds: Double
    /// Whether the holder gets access it lacked (the entry's `claim.grant`).
    var grant: Bool
    /// Whether it is a simulated accessory (its nodes are a test's files, enforced by accmond itself).
    var simulated: Bool

    init(_ accessory: Accessory, policy: ClaimPolicy, simulated: Bool) {
        self.simulated = simulated
        accessoryID = accessory.accessoryID
        kind = accessory.kind
        portPath = accessory.portPath
        connection = accessory.connectionID
        last = accessory
        returnSeconds = policy.returnSeconds
        grant = policy.grant
    }

    /// Whether `accessory`, newly connected, is this one coming back: the same accessory id, or the same kind on the
    /// same USB port (a bootloader may present other ids).
    func isReturn(of accessory: Accessory) -> Bool {
        guard connection == nil else { return false }
        if accessory.accessoryID == accessoryID { return true }
        return !portPath.isEmpty && accessory.portPath == portPath && accessory.kind == kind
    }
}

/// A claim: what it holds, who holds it, since when and why.
struct Claim: Sendable, Hashable, Codable {
    let number: UInt64
    let token: String
    var holder: Claimant
    var items: [ClaimedItem]
    /// When it was granted (wall clock).
    var since: Double
    var reason: String
    /// When it ends at the latest: monotonic nanoseconds, and the same as wall clock.
    var expiresAt: UInt64?
    var expiresAtWall: Double?
    /// Whether it lives on with the holder's preserved session.
    var preserve: Bool

    var claimID: String { "c-\(number)" }
    var connections: [ConnectionID] { items.compactMap(\.connection) }
    var isReturning: Bool { items.contains { $0.connection == nil } }
}

/// A claim request waiting in line.
struct Waiter: Sendable, Hashable, Codable {
    enum Want: Sendable, Hashable, Codable {
        /// These accessories (asked for by connection id, followed across re-enumerations as claims are).
        case items([ClaimedItem])
        /// `count` accessories that match.
        case matching(AccessoryFilter, serial: String?, count: Int)
    }

    let number: UInt64
    let token: String
    var claimant: Claimant
    var want: Want
    var since: Double
    var reason: String
    var maxSeconds: Double?
    var preserve: Bool

    var claimID: String { "c-\(number)" }
}

/// The questions the claim book asks of the daemon's state, which it does not hold: what is connected, who may claim
/// what, and each accessory's claim policy.
struct ClaimWorld {
    /// The connected accessories, as their holders would see them, in connection order.
    var connected: [Accessory]
    /// Whether `claimant` may claim `accessory` (it sees it, and the entry's claim list admits it).
    var mayClaim: (Claimant, Accessory) -> Bool
    /// Whether `claimant` sees `accessory` (so a refusal may say it exists).
    var sees: (Claimant, Accessory) -> Bool
    /// The claim policy of the entry that allows `accessory` (the default for an accessory no entry allows).
    var policy: (Accessory) -> ClaimPolicy
    /// Whether `accessory` is simulated.
    var simulated: (Accessory) -> Bool = { _ in true }
    /// Now, monotonic nanoseconds and wall clock.
    var now: UInt64
    var wallNow: Double

    func accessory(_ connection: ConnectionID) -> Accessory? {
        connected.first { $0.connectionID == connection }
    }

    /// A claimed item of `accessory`, with its entry's policy.
    func item(_ accessory: Accessory) -> ClaimedItem {
        ClaimedItem(accessory, policy: policy(accessory), simulated: simulated(accessory))
    }
}
