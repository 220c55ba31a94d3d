import AccmonLogging
import AccmonProtocol
import AccmonSys

/// The claims and the line as the state file keeps them, so that a restart (a crash, an upgrade) takes nothing from a
/// holder who comes back: every claim and waiter with its token, and the next claim number.
struct PersistedClaims: Codable, Sendable, Equatable {
    var nextNumber: UInt64
    var claims: [Claim]
    var waiters: [Waiter]
}

extension ClaimDesk {
    /// What the state file keeps; `nil` when there is nothing to keep.
    func persisted() -> PersistedClaims? {
        guard !isIdle || book.nextNumber > 1 else { return nil }
        return PersistedClaims(
            nextNumber: book.nextNumber, claims: book.claims.values.sorted { $0.number < $1.number },
            waiters: book.waiters)
    }

    /// Takes the saved claims back after a restart. Monotonic deadlines do not survive one: every holder and waiter
    /// gets the reclaim window to come back with its token, an accessory away gets its return window again, and a
    /// maximum duration keeps its wall-clock end.
    func restore(_ saved: PersistedClaims) {
        let now = monotonicNanoseconds()
        let wallNow = wallClockSeconds()
        let claims = saved.claims.map { saved -> Claim in
            var claim = saved
            for index in claim.items.indices where claim.items[index].connection == nil {
                claim.items[index].awayUntil = now &+ UInt64(claim.items[index].returnSeconds * 1e9)
            }
            if let end = claim.expiresAtWall { claim.expiresAt = now &+ UInt64(max(0, end - wallNow) * 1e9) }
            return claim
        }
        let waiters = saved.waiters.map { saved -> Waiter in
            var waiter = saved
            if case .items(var items) = waiter.want {
                for index in items.indices where items[index].connection == nil {
                    items[index].awayUntil = now &+ UInt64(items[index].returnSeconds * 1e9)
                }
                waiter.want = .items(items)
            }
            return waiter
        }
        book.restore(claims: claims, waiters: waiters, nextNumber: saved.nextNumber)
        book.awaitClaimersBack(until: now &+ UInt64(reclaimSeconds * 1e9))
        if !claims.isEmpty || !waiters.isEmpty {
            logger.notice(
                .claimGranted,
                "claims restored: \(claims.count) held, \(waiters.count) waiting; holders and waiters have"
                    + " \(Int(reclaimSeconds)) s to come back with their tokens")
        }
    }

    /// Enforces the restored claims again, on the calling thread, before the loop serves: whatever happened to the
    /// nodes while accmond was down, the holders' claims hold from the first request on.
    func enforceRestoredClaims() {
        var operations: [(NodeOperation, simulated: Bool)] = []
        for claim in book.claims.values.sorted(by: { $0.number < $1.number }) {
            for item in claim.items where item.connection != nil {
                if !item.portPath.isEmpty { operations.append((.markPort(item.portPath, claimed: true), item.simulated)) }
                let holder = nodeHolder(claim, item)
                operations += item.last.deviceNodes.map { (.hold($0, holder), item.simulated) }
            }
        }
        // Run even with no claim: the helper may hold nodes of claims that ended while accmond was down.
        for result in nodes.runNow(operations) {
            if case .failed(let why) = result.step {
                logger.error(.claimEnforcement, "restored claim not enforced again: \(why)")
            }
        }
    }
}
