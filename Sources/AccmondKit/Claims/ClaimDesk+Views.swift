import AccmonProtocol

extension ClaimDesk {
    // MARK: How claims are shown

    /// A claim as everyone who sees its accessories sees it.
    func summary(of claim: Claim, _ world: ClaimWorld) -> ClaimSummary {
        ClaimSummary(
            claimID: claim.claimID, holder: claim.holder.party, since: claim.since, reason: claim.reason,
            waiting: book.waitingCount(for: claim, world), state: claim.isReturning ? .returning : .held,
            connections: claim.connections, accessoryIDs: claim.items.map(\.accessoryID),
            expiresAt: claim.expiresAtWall)
    }

    /// A claim as its holder sees it; with the results of enforcing it, its nodes and the processes that had them
    /// open.
    func info(of claim: Claim, _ world: ClaimWorld, nodeResults: [NodeResult] = []) -> ClaimInfo {
        var nodes: [ClaimedNode] = []
        var openers: [NodeOpener] = []
        for result in nodeResults {
            switch result.operation {
            case .hold(let path, _):
                switch result.step {
                case .done: nodes.append(ClaimedNode(path: path, enforced: true))
                case .skipped(let why), .failed(let why), .gone(let why):
                    nodes.append(ClaimedNode(path: path, enforced: false, note: why))
                }
            case .openers:
                openers += result.openers.map { opener in
                    var named = opener
                    if named.user == nil {
                        let name = names.name(of: opener.uid)
                        named.user = name.isEmpty ? nil : name
                    }
                    return named
                }
            default: break
            }
        }
        return ClaimInfo(
            claimID: claim.claimID, token: claim.token, state: claim.isReturning ? .returning : .held,
            holder: claim.holder.party,
            accessories: claim.items.compactMap { item in item.connection.flatMap(world.accessory) ?? item.last },
            nodes: nodes, openers: openers, since: claim.since, reason: claim.reason, expiresAt: claim.expiresAtWall)
    }

    /// A waiting claim as its claimer sees it: its place in line and who holds what it waits for.
    func info(of waiter: Waiter, _ world: ClaimWorld) -> ClaimInfo {
        let candidates = book.candidates(of: waiter, world)
        let blockers = Set(candidates.compactMap { book.holding[$0] }).sorted().compactMap { book.claims[$0] }
        var accessories: [Accessory] = []
        if case .items(let items) = waiter.want {
            accessories = items.map { item in item.connection.flatMap(world.accessory) ?? item.last }
        }
        return ClaimInfo(
            claimID: waiter.claimID, token: waiter.token, state: .waiting, holder: waiter.claimant.party,
            accessories: accessories, since: waiter.since, reason: waiter.reason,
            position: book.position(of: waiter, world), blockers: blockers.map { summary(of: $0, world) })
    }

    /// A waiter as `claims` lists it.
    func waiterSummary(_ waiter: Waiter, _ world: ClaimWorld) -> ClaimWaiter {
        var connections: [ConnectionID] = []
        var count = 0
        switch waiter.want {
        case .items(let items):
            connections = items.compactMap(\.connection)
            count = items.count
        case .matching(_, _, let wanted): count = wanted
        }
        return ClaimWaiter(
            claimID: waiter.claimID, party: waiter.claimant.party, since: waiter.since, reason: waiter.reason,
            connections: connections, count: count, position: book.position(of: waiter, world))
    }

    /// The claims on `connections`, as a snapshot asked for with `claims` carries them.
    func summaries(of connections: [ConnectionID]) -> [ConnectionID: ClaimSummary] {
        guard !book.claims.isEmpty else { return [:] }
        let world = world()
        var result: [ConnectionID: ClaimSummary] = [:]
        for connection in connections {
            guard let number = book.holding[connection], let claim = book.claims[number] else { continue }
            result[connection] = summary(of: claim, world)
        }
        return result
    }
}
