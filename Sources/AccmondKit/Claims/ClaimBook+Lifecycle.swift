import AccmonManifest
import AccmonProtocol

/// What happened to claims and waiters, for the broker loop to act on.
enum ClaimEffect: Equatable {
    /// A claimed accessory's connection ended: the claim waits for it (`accessory` is the connection that ended).
    case returning(claim: UInt64, accessory: Accessory)
    /// The accessory came back as `accessory`, held at once.
    case returned(claim: UInt64, accessory: Accessory, previous: ConnectionID)
    /// A claim ended without its holder's release: `why`.
    case ended(Claim, why: ClaimEndReason)
    /// A waiter can never be served any more: it left the line.
    case cancelled(Waiter, why: String)
    /// A waiter's wanted accessory came back as a new connection: it follows it.
    case waiterFollowed(waiter: UInt64)
}

/// Why a claim ended.
enum ClaimEndReason: Equatable {
    /// The holder released it.
    case released
    /// An admin broke it.
    case broken(by: Party, reason: String)
    /// A claimed accessory did not come back within its return window.
    case lost(Accessory)
    /// It reached its maximum duration.
    case expired
    /// Its holder went away (the connection ended, the preserved session's grace or the reclaim window passed).
    case holderGone
}

extension ClaimBook {
    // MARK: Accessories coming and going

    /// A connection ended: a claim holding it waits for the accessory to come back (its return window); a waiter
    /// that wants it by connection waits for it as well.
    mutating func connectionEnded(_ accessory: Accessory, now: UInt64) -> [ClaimEffect] {
        var effects: [ClaimEffect] = []
        if let number = holding[accessory.connectionID] {
            update(number) { claim in
                for index in claim.items.indices where claim.items[index].connection == accessory.connectionID {
                    claim.items[index].connection = nil
                    claim.items[index].last = accessory
                    claim.items[index].awayUntil = now &+ UInt64(claim.items[index].returnSeconds * 1e9)
                }
            }
            effects.append(.returning(claim: number, accessory: accessory))
        }
        for waiter in waiters {
            guard case .items(var items) = waiter.want,
                let index = items.firstIndex(where: { $0.connection == accessory.connectionID })
            else { continue }
            items[index].connection = nil
            items[index].last = accessory
            items[index].awayUntil = now &+ UInt64(items[index].returnSeconds * 1e9)
            updateWaiter(waiter.number) { $0.want = .items(items) }
        }
        return effects
    }

    /// A connection began: a claim waiting for an accessory that this is, coming back, holds it at once; a waiter
    /// that wanted it follows it. New accessories are offered to waiters by ``offer(_:)``, afterwards.
    mutating func connectionStarted(_ accessory: Accessory, _ world: ClaimWorld) -> [ClaimEffect] {
        var effects: [ClaimEffect] = []
        if holding[accessory.connectionID] == nil,
            let claim = claims.values.sorted(by: { $0.number < $1.number }).first(where: { claim in
                claim.items.contains { $0.isReturn(of: accessory) } && world.mayClaim(claim.holder, accessory)
            })
        {
            var previous = ConnectionID(0)
            update(claim.number) { claim in
                guard let index = claim.items.firstIndex(where: { $0.isReturn(of: accessory) }) else { return }
                previous = claim.items[index].last.connectionID
                claim.items[index].connection = accessory.connectionID
                claim.items[index].last = accessory
                claim.items[index].accessoryID = accessory.accessoryID
                claim.items[index].awayUntil = nil
            }
            effects.append(.returned(claim: claim.number, accessory: accessory, previous: previous))
        }
        for waiter in waiters {
            guard case .items(var items) = waiter.want, let index = items.firstIndex(where: { $0.isReturn(of: accessory) })
            else { continue }
            items[index].connection = accessory.connectionID
            items[index].last = accessory
            items[index].awayUntil = nil
            updateWaiter(waiter.number) { $0.want = .items(items) }
            effects.append(.waiterFollowed(waiter: waiter.number))
        }
        return effects
    }

    // MARK: Holders coming and going

    /// A session ended. Its waiters leave the line; its claims end, except those it asked to keep while its session
    /// is preserved (`preserve` and a restore id): they wait `graceSeconds` for the session to come back.
    mutating func sessionEnded(_ session: UInt64, preserved: RestoreKey?, graceSeconds: Double, now: UInt64)
        -> [ClaimEffect]
    {
        var effects: [ClaimEffect] = []
        for waiter in waiters where waiter.claimant.session == session {
            if waiter.preserve, let preserved, waiter.claimant.restoreKey == preserved {
                updateWaiter(waiter.number) {
                    $0.claimant.session = nil
                    $0.claimant.awayUntil = now &+ UInt64(graceSeconds * 1e9)
                }
            } else {
                removeWaiter(waiter.number)
            }
        }
        for claim in claims.values.sorted(by: { $0.number < $1.number }) where claim.holder.session == session {
            if claim.preserve, let preserved, claim.holder.restoreKey == preserved {
                update(claim.number) {
                    $0.holder.session = nil
                    $0.holder.awayUntil = now &+ UInt64(graceSeconds * 1e9)
                }
            } else if let ended = end(claim.number) {
                effects.append(.ended(ended, why: .holderGone))
            }
        }
        return effects
    }

    /// A session took up its preserved session (`hello` with the restore id): the claims and places in line kept
    /// for it are its again (a remote user's stay that remote user's: the bridge only speaks for it). Returns the
    /// claims taken up.
    mutating func sessionRestored(_ key: RestoreKey, as session: UInt64, party: Party) -> [UInt64] {
        var taken: [UInt64] = []
        for claim in claims.values where claim.holder.session == nil && claim.holder.restoreKey == key {
            update(claim.number) {
                $0.holder.session = session
                $0.holder.awayUntil = nil
                if $0.holder.remoteUser == nil { $0.holder.party = party }
            }
            taken.append(claim.number)
        }
        for waiter in waiters where waiter.claimant.session == nil && waiter.claimant.restoreKey == key {
            updateWaiter(waiter.number) {
                $0.claimant.session = session
                $0.claimant.awayUntil = nil
                if $0.claimant.remoteUser == nil { $0.claimant.party = party }
            }
        }
        return taken.sorted()
    }

    /// What a `claim` with a token found.
    enum Resumed: Equatable {
        case claim(UInt64)
        case waiter(UInt64)
        case refused(ProtocolError)
    }

    /// A `claim` with the token of a claim or place in line that is away (after a restart of the daemon, or of the
    /// client within its grace): `claimant`, the same user, takes it up.
    mutating func resume(token: String, by claimant: Claimant) -> Resumed {
        if let claim = claims.values.first(where: { $0.token == token }) {
            guard claim.holder.isSameClaimer(as: claimant) else { return .refused(Self.unknownToken) }
            guard claim.holder.session == nil else {
                return .refused(
                    ProtocolError(.noSuchClaim, "claim: token: \(claim.claimID) is held by a connection that is open"))
            }
            update(claim.number) {
                $0.holder.session = claimant.session
                $0.holder.party = claimant.party
                $0.holder.awayUntil = nil
            }
            return .claim(claim.number)
        }
        if let waiter = waiters.first(where: { $0.token == token }) {
            guard waiter.claimant.isSameClaimer(as: claimant) else { return .refused(Self.unknownToken) }
            guard waiter.claimant.session == nil else {
                return .refused(
                    ProtocolError(.noSuchClaim, "claim: token: \(waiter.claimID) waits on a connection that is open"))
            }
            updateWaiter(waiter.number) {
                $0.claimant.session = claimant.session
                $0.claimant.party = claimant.party
                $0.claimant.awayUntil = nil
            }
            return .waiter(waiter.number)
        }
        return .refused(Self.unknownToken)
    }

    private static let unknownToken = ProtocolError(
        .noSuchClaim, "claim: token: no claim or waiting claim of yours has this token (ended, or never issued)")

    /// After a restart: every holder and waiter is away until `until`, when it is given up unless it came back.
    mutating func awaitClaimersBack(until: UInt64) {
        for number in claims.keys {
            update(number) {
                $0.holder.session = nil
                $0.holder.awayUntil = until
            }
        }
        for waiter in waiters {
            updateWaiter(waiter.number) {
                $0.claimant.session = nil
                $0.claimant.awayUntil = until
            }
        }
    }

    // MARK: Time

    /// Ends what is past its time: claims past their maximum duration, accessories not back within their return
    /// window, holders and waiters not back within their grace.
    mutating func expire(now: UInt64) -> [ClaimEffect] {
        var effects: [ClaimEffect] = []
        for claim in claims.values.sorted(by: { $0.number < $1.number }) {
            let why: ClaimEndReason?
            if let expiresAt = claim.expiresAt, now >= expiresAt {
                why = .expired
            } else if let item = claim.items.first(where: { ($0.awayUntil ?? .max) <= now }) {
                why = .lost(item.last)
            } else if let until = claim.holder.awayUntil, now >= until {
                why = .holderGone
            } else {
                why = nil
            }
            if let why, let ended = end(claim.number) { effects.append(.ended(ended, why: why)) }
        }
        for waiter in waiters {
            if let until = waiter.claimant.awayUntil, now >= until {
                removeWaiter(waiter.number)
                effects.append(.cancelled(waiter, why: "its claimer did not come back with its token in time"))
            } else if case .items(let items) = waiter.want, let item = items.first(where: { ($0.awayUntil ?? .max) <= now }) {
                removeWaiter(waiter.number)
                effects.append(
                    .cancelled(
                        waiter,
                        why: "\(item.last.accessoryID) did not come back within \(shownSeconds(item.returnSeconds)) s"))
            }
        }
        return effects
    }

    /// The next moment something expires (monotonic nanoseconds); `nil` when nothing will.
    var nextDeadline: UInt64? {
        var deadlines: [UInt64] = []
        for claim in claims.values {
            if let expiresAt = claim.expiresAt { deadlines.append(expiresAt) }
            deadlines += claim.items.compactMap(\.awayUntil)
            if let until = claim.holder.awayUntil { deadlines.append(until) }
        }
        for waiter in waiters {
            if let until = waiter.claimant.awayUntil { deadlines.append(until) }
            if case .items(let items) = waiter.want { deadlines += items.compactMap(\.awayUntil) }
        }
        return deadlines.min()
    }

    // MARK: Rechecks

    /// After a manifest reload: claims and waiters whose claimer may no longer claim what they hold or want end.
    mutating func recheck(_ world: ClaimWorld) -> [ClaimEffect] {
        var effects: [ClaimEffect] = []
        for claim in claims.values.sorted(by: { $0.number < $1.number }) {
            let refused = claim.items.contains { item in
                guard let connection = item.connection, let accessory = world.accessory(connection) else { return false }
                return !world.mayClaim(claim.holder, accessory)
            }
            if refused, let ended = end(claim.number) {
                effects.append(
                    .ended(
                        ended,
                        why: .broken(
                            by: Party(user: "accmond"), reason: "the manifest no longer lets its holder claim it")))
            }
        }
        for waiter in waiters {
            guard case .items(let items) = waiter.want else { continue }
            let refused = items.contains { item in
                guard let connection = item.connection, let accessory = world.accessory(connection) else { return false }
                return !world.mayClaim(waiter.claimant, accessory)
            }
            if refused {
                removeWaiter(waiter.number)
                effects.append(.cancelled(waiter, why: "the manifest no longer lets you claim what you wait for"))
            }
        }
        return effects
    }
}

/// Seconds as people read them: `10`, `1.5`, `0.2`.
func shownSeconds(_ seconds: Double) -> String {
    seconds == seconds.rounded() ? String(Int(seconds)) : String((seconds * 10).rounded() / 10)
}
