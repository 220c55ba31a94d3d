import AccmonManifest
import AccmonProtocol

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

/// Claims and the line of claimers, decided in one place: pure, unit- and property-tested. The broker loop applies
/// what it returns (``ClaimEffect``): enforcement on the nodes, notices, logs, history, the state file.
///
/// Rules: a claim of several accessories takes all or none, at once, so two claimers never hold one each of what both
/// want. A request whose accessories are all free is granted at once; otherwise it fails (`claim-conflict`) or waits.
/// When accessories become free they are offered to the waiters in the order they came: the first that can take all
/// it asked for gets them, so what is free never sits idle behind a waiter that cannot be served yet; a waiter that is
/// away (after a restart, within its window) keeps its turn, what it could take kept for it and granted to nobody
/// until it is back or its window ends. A claim follows its accessories across re-enumerations
/// (``ClaimedItem/isReturn(of:)``) for their return window.
struct ClaimBook: Sendable {
    private(set) var claims: [UInt64: Claim] = [:]
    private(set) var waiters: [Waiter] = []
    /// The claim holding each connection.
    private(set) var holding: [ConnectionID: UInt64] = [:]
    private(set) var nextNumber: UInt64 = 1
    /// Makes tokens; random in the daemon, seeded in tests.
    var makeToken: @Sendable () -> String

    init(makeToken: @escaping @Sendable () -> String) {
        self.makeToken = makeToken
    }

    // MARK: Asking

    /// What became of a claim request.
    enum Outcome: Equatable {
        case granted(Claim)
        case queued(Waiter)
        /// Held by others, and the claimer would not wait: the claims that hold what it asked for.
        case conflict([UInt64])
        case refused(ProtocolError)
    }

    /// Decides a `claim` request by connections or by filter (``ClaimRequest/Target/resume(token:)`` is
    /// ``resume(token:by:)``'s).
    mutating func request(_ request: ClaimRequest, by claimant: Claimant, in world: ClaimWorld) -> Outcome {
        switch request.target {
        case .connections(let connections):
            var accessories: [Accessory] = []
            for connection in connections {
                guard let accessory = world.accessory(connection), world.sees(claimant, accessory) else {
                    // Not connected, or not visible: the same answer, so that nothing leaks about what one may not see.
                    return .refused(
                        ProtocolError(
                            .noSuchConnection, "claim: connections: no accessory you may claim is connected as \(connection)"))
                }
                guard world.mayClaim(claimant, accessory) else {
                    return .refused(Self.notClaimable(connection))
                }
                accessories.append(accessory)
            }
            let items = accessories.map { world.item($0) }
            let blockers = Set(connections.compactMap { holding[$0] })
            if blockers.isEmpty {
                return .granted(grant(items, to: claimant, request: request, since: world.wallNow, now: world.now, world))
            }
            guard request.wait else { return .conflict(blockers.sorted()) }
            return .queued(enqueue(.items(items), claimant, request, world))
        case .matching(let filter, let serial, let count):
            let candidates = world.connected.filter {
                Self.matches($0, filter, serial) && world.mayClaim(claimant, $0)
            }
            // With wait, a claimer may wait for accessories to be plugged in, not only for holders to let go.
            let seen = world.connected.filter { Self.matches($0, filter, serial) && world.sees(claimant, $0) }
            if candidates.count < count, seen.count >= count {
                return .refused(
                    ProtocolError(
                        .permissionDenied,
                        "claim: filter: \(seen.count) matching \(seen.count == 1 ? "accessory is" : "accessories are") "
                            + "visible to you, \(candidates.count) of them yours to claim, \(count) wanted (the manifest "
                            + "entry's claim list)"))
            }
            guard candidates.count >= count || request.wait else {
                return .refused(
                    ProtocolError(
                        .noMatch,
                        "claim: filter: \(candidates.count) connected \(candidates.count == 1 ? "accessory matches" : "accessories match")"
                            + " among those you may claim, \(count) wanted"))
            }
            let free = candidates.filter { holding[$0.connectionID] == nil }
            if free.count >= count {
                let items = free.prefix(count).map { world.item($0) }
                return .granted(grant(items, to: claimant, request: request, since: world.wallNow, now: world.now, world))
            }
            guard request.wait else {
                return .conflict(Set(candidates.compactMap { holding[$0.connectionID] }).sorted())
            }
            return .queued(enqueue(.matching(filter, serial: serial, count: count), claimant, request, world))
        case .resume:
            preconditionFailure("ClaimBook.request: a resume goes through resume(token:by:)")
        }
    }

    static func notClaimable(_ connection: ConnectionID) -> ProtocolError {
        ProtocolError(
            .permissionDenied,
            "claim: connections: \(connection): you see this accessory but may not claim it (the manifest entry's claim "
                + "list)")
    }

    static func matches(_ accessory: Accessory, _ filter: AccessoryFilter, _ serial: String?) -> Bool {
        filter.matches(accessory) && (serial.map { $0 == accessory.serialNumber } ?? true)
    }

    private mutating func grant(
        _ items: [ClaimedItem], to claimant: Claimant, request: ClaimRequest, since: Double, now: UInt64,
        _ world: ClaimWorld
    ) -> Claim {
        let number = takeNumber()
        return grant(
            Claim(
                number: number, token: makeToken(), holder: claimant, items: items, since: since,
                reason: request.reason, expiresAt: nil, expiresAtWall: nil, preserve: request.preserve),
            maxSeconds: request.maxSeconds, world)
    }

    /// Records `claim` as held, with its maximum duration: the claimer's, capped by every entry's `maxSeconds`.
    private mutating func grant(_ claim: Claim, maxSeconds: Double?, _ world: ClaimWorld) -> Claim {
        var claim = claim
        let caps = claim.items.compactMap { world.policy($0.last).maxSeconds }
        if let limit = (caps + [maxSeconds].compactMap { $0 }).min() {
            claim.expiresAt = world.now &+ UInt64(limit * 1e9)
            claim.expiresAtWall = world.wallNow + limit
        }
        claims[claim.number] = claim
        for connection in claim.connections { holding[connection] = claim.number }
        return claim
    }

    private mutating func enqueue(
        _ want: Waiter.Want, _ claimant: Claimant, _ request: ClaimRequest, _ world: ClaimWorld
    ) -> Waiter {
        let waiter = Waiter(
            number: takeNumber(), token: makeToken(), claimant: claimant, want: want, since: world.wallNow,
            reason: request.reason, maxSeconds: request.maxSeconds, preserve: request.preserve)
        waiters.append(waiter)
        return waiter
    }

    private mutating func takeNumber() -> UInt64 {
        defer { nextNumber += 1 }
        return nextNumber
    }

    // MARK: Offering what is free

    /// Offers the free accessories to the waiters in the order they came; each that can take all it asked for gets a
    /// claim. Returns the claims granted, each with the waiter it came from.
    mutating func offer(_ world: ClaimWorld) -> [(waiter: Waiter, claim: Claim)] {
        var granted: [(Waiter, Claim)] = []
        // What waiters that are away could take: kept for them, from those behind them.
        var reserved: Set<ConnectionID> = []
        var index = 0
        while index < waiters.count {
            let waiter = waiters[index]
            guard let items = takeable(waiter, world, excluding: reserved) else {
                index += 1
                continue
            }
            // A waiter that is away (accmond restarted, or its preserved session's grace) keeps its turn, but is
            // granted nothing until it is back with its token: a waiter gone for good must not end up holding what it
            // never takes up. When its window ends, its place goes (``expire(now:)``), and what it kept with it.
            if waiter.claimant.session == nil && waiter.claimant.awayUntil != nil {
                reserved.formUnion(items.compactMap(\.connection))
                index += 1
                continue
            }
            waiters.remove(at: index)
            let claim = grant(
                Claim(
                    number: waiter.number, token: waiter.token, holder: waiter.claimant, items: items,
                    since: world.wallNow, reason: waiter.reason, expiresAt: nil, expiresAtWall: nil,
                    preserve: waiter.preserve),
                maxSeconds: waiter.maxSeconds, world)
            granted.append((waiter, claim))
        }
        return granted
    }

    /// What `waiter` would hold if it were served now, leaving `excluding` alone; `nil` when it cannot take all it
    /// asked for.
    func takeable(_ waiter: Waiter, _ world: ClaimWorld, excluding: Set<ConnectionID> = []) -> [ClaimedItem]? {
        switch waiter.want {
        case .items(let items):
            guard items.allSatisfy({ $0.connection.map { holding[$0] == nil && !excluding.contains($0) } ?? false })
            else { return nil }
            return items
        case .matching(let filter, let serial, let count):
            let free = world.connected.filter {
                holding[$0.connectionID] == nil && !excluding.contains($0.connectionID) && Self.matches($0, filter, serial)
                    && world.mayClaim(waiter.claimant, $0)
            }
            guard free.count >= count else { return nil }
            return free.prefix(count).map { world.item($0) }
        }
    }

    /// The connections a waiter would take, were they free: for contention notices and places in line.
    func candidates(of waiter: Waiter, _ world: ClaimWorld) -> Set<ConnectionID> {
        switch waiter.want {
        case .items(let items): Set(items.compactMap(\.connection))
        case .matching(let filter, let serial, _):
            Set(
                world.connected.filter { Self.matches($0, filter, serial) && world.mayClaim(waiter.claimant, $0) }
                    .map(\.connectionID))
        }
    }

    /// A waiter's place in line: 1 + the earlier waiters that want any of the same connections.
    func position(of waiter: Waiter, _ world: ClaimWorld) -> Int {
        let mine = candidates(of: waiter, world)
        var position = 1
        for earlier in waiters {
            if earlier.number == waiter.number { break }
            if !candidates(of: earlier, world).isDisjoint(with: mine) { position += 1 }
        }
        return position
    }

    /// How many waiters want any of `claim`'s connections.
    func waitingCount(for claim: Claim, _ world: ClaimWorld) -> Int {
        let held = Set(claim.connections)
        return waiters.filter { !candidates(of: $0, world).isDisjoint(with: held) }.count
    }

    // MARK: Ending

    /// Ends a claim: its connections are free (offer them with ``offer(_:)`` afterwards). Returns it.
    @discardableResult
    mutating func end(_ number: UInt64) -> Claim? {
        guard let claim = claims.removeValue(forKey: number) else { return nil }
        for connection in claim.connections where holding[connection] == number {
            holding.removeValue(forKey: connection)
        }
        return claim
    }

    /// Takes a waiter out of the line. Returns it.
    @discardableResult
    mutating func removeWaiter(_ number: UInt64) -> Waiter? {
        guard let index = waiters.firstIndex(where: { $0.number == number }) else { return nil }
        return waiters.remove(at: index)
    }

    /// Updates a claim in place (its holder, an item); the connections it holds must stay registered in ``holding``.
    mutating func update(_ number: UInt64, _ change: (inout Claim) -> Void) {
        guard var claim = claims[number] else { return }
        let before = Set(claim.connections)
        change(&claim)
        for connection in before.subtracting(claim.connections) where holding[connection] == number {
            holding.removeValue(forKey: connection)
        }
        for connection in claim.connections { holding[connection] = number }
        claims[number] = claim
    }

    mutating func updateWaiter(_ number: UInt64, _ change: (inout Waiter) -> Void) {
        guard let index = waiters.firstIndex(where: { $0.number == number }) else { return }
        change(&waiters[index])
    }

    /// Puts back what a saved state held (after a restart), numbering on after `nextNumber`.
    mutating func restore(claims saved: [Claim], waiters savedWaiters: [Waiter], nextNumber: UInt64) {
        claims = Dictionary(saved.map { ($0.number, $0) }) { first, _ in first }
        holding = [:]
        for claim in claims.values { for connection in claim.connections { holding[connection] = claim.number } }
        waiters = savedWaiters
        self.nextNumber = max(nextNumber, (saved.map(\.number) + savedWaiters.map(\.number)).max().map { $0 + 1 } ?? 1)
    }
}
