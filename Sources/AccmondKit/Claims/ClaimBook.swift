import AccmonManifest
import AccmonProtocol

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
