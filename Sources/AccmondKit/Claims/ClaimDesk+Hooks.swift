import AccmonLogging
import AccmonProtocol
import AccmonSys

extension ClaimDesk {
    // MARK: What the rest of the daemon tells the desk

    /// An accessory connected (after the manifest's verdict): a claim waiting for it to come back holds it, and it
    /// is offered to the waiters.
    func accessoryConnected(_ accessory: Accessory) {
        guard !isIdle else { return }
        let world = world()
        let announced = world.accessory(accessory.connectionID) ?? accessory
        finish(book.connectionStarted(announced, world), world: world, actor: nil)
    }

    /// An accessory disconnected: a claim holding it waits for it to come back.
    func accessoryDisconnected(_ accessory: Accessory) {
        guard !isIdle else { return }
        finish(book.connectionEnded(accessory, now: monotonicNanoseconds()), world: world(), actor: nil)
    }

    /// udev reported a connected device again (a `change` event): a held node may have been rewritten, so the claim is
    /// applied again.
    func deviceChanged(_ accessory: Accessory) {
        guard !isIdle, let number = book.holding[accessory.connectionID], let claim = book.claims[number] else { return }
        book.update(number) { claim in
            for index in claim.items.indices where claim.items[index].connection == accessory.connectionID {
                claim.items[index].last = accessory
            }
        }
        guard let item = claim.items.first(where: { $0.connection == accessory.connectionID }) else { return }
        let holder = nodeHolder(claim, item)
        _ = nodes.submit(accessory.deviceNodes.map { (.hold($0, holder), item.simulated) })
    }

    /// A session ended: its waiters leave the line, its claims end (or wait for it, kept with its preserved session).
    func sessionClosed(_ session: Session) {
        guard !isIdle, !stopping else { return }
        let effects = book.sessionEnded(
            session.number, preserved: session.memory == nil ? nil : session.restoreKey, graceSeconds: graceSeconds,
            now: monotonicNanoseconds())
        persistence.markDirty()
        finish(effects, world: world(), actor: party(of: session))
    }

    /// A session took up a preserved session: the claims kept with it are its again.
    func sessionRestored(_ session: Session, key: RestoreKey) {
        guard !isIdle else { return }
        let taken = book.sessionRestored(key, as: session.number, party: party(of: session))
        for number in taken {
            if let claim = book.claims[number] { log(.claimGranted, "claim taken up with its restored session", claim: claim) }
        }
        if !taken.isEmpty { persistence.markDirty() }
    }

    /// After a manifest reload: claims and waiters that may no longer be claimed end.
    func manifestReloaded() {
        guard !isIdle else { return }
        let world = world()
        finish(book.recheck(world), world: world, actor: Party(user: "accmond"))
    }

    /// Once per loop turn: node results, names looked up, what expired.
    func turn() {
        takeNodeResults()
        let named = names.takeResults()
        if !named.isEmpty { refreshNames(Set(named)) }
        guard let deadline = book.nextDeadline, monotonicNanoseconds() >= deadline else { return }
        finish(book.expire(now: monotonicNanoseconds()), world: world(), actor: nil)
    }

    /// Nanoseconds until something expires; `nil` when nothing will.
    func nanosecondsUntilDue(now: UInt64) -> UInt64? {
        guard let deadline = book.nextDeadline else { return nil }
        return deadline > now ? deadline - now : 0
    }

    /// Fills in the names of parties whose uid's name has just been looked up.
    private func refreshNames(_ uids: Set<UInt32>) {
        for claim in book.claims.values {
            guard let uid = claim.holder.principal?.uid, claim.holder.remoteUser == nil, uids.contains(uid),
                claim.holder.party.user.isEmpty
            else { continue }
            book.update(claim.number) { $0.holder.party.user = names.name(of: uid) }
            markChanged(claim.connections)
        }
        for waiter in book.waiters {
            guard let uid = waiter.claimant.principal?.uid, waiter.claimant.remoteUser == nil, uids.contains(uid),
                waiter.claimant.party.user.isEmpty
            else { continue }
            book.updateWaiter(waiter.number) { $0.claimant.party.user = names.name(of: uid) }
        }
        publishChanges()
    }
}
