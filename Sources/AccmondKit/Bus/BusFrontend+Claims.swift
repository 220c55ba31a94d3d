import AccmonLogging
import AccmonManifest
import AccmonProtocol
import AccmonSys
import AccmonSystemd

/// Claims made on the bus: their objects (`/org/accmon/Accmon1/claims/N`, the holder's alone), what the claims desk
/// tells their holders (as signals), `Release`, and the admin methods `ReleaseOther` and `Reload`.
extension BusFrontend {
    /// The claim `number` as `peer` may reach it: held by the peer's claim session.
    func ownClaim(_ number: UInt64, of peer: BusPeer) -> Claim? {
        guard let session = peer.claimSession, let claim = state.claims?.book.claims[number],
            claim.holder.session == session.number
        else { return nil }
        return claim
    }

    /// The claim object's properties, in their declared order.
    func claimProperties(_ claim: Claim) -> [(String, BusValue)] {
        let waiting = state.claims.map { $0.book.waitingCount(for: claim, $0.world()) } ?? 0
        return [
            ("ClaimID", .string(claim.claimID)),
            ("Holder", .string(claim.holder.party.user)),
            ("HolderUID", .uint32(claim.holder.principal?.uid ?? 0)),
            ("Since", .double(claim.since)),
            ("Reason", .string(claim.reason)),
            ("Waiting", .uint32(UInt32(clamping: waiting))),
            ("State", .string(claim.isReturning ? "returning" : "held")),
            ("Accessories", .array(element: "o", claim.connections.map { .objectPath(BusAPI.accessoryPath($0)) })),
        ]
    }

    /// `Release()` on a claim object: the claim ends as its holder's `release` ends it; the reply comes once its
    /// nodes are as they were.
    func releaseClaim(_ call: BusCall, _ claim: Claim) {
        guard let claims = state.claims else { return }
        claims.releaseOwn(claim.number, actor: claim.holder.party) { [self] in reply(call) }
    }

    /// What the claims desk tells the holder (or waiter) of a claim made on the bus: a signal on its object, or the
    /// end of an `Open` waiting in line.
    func claimNotice(_ notice: ClaimNotice, to session: Session) {
        guard let endpoint = session.busEndpoint, let number = UInt64(notice.claimID.dropFirst(2)) else { return }
        let path = BusAPI.claimPath(number)
        var details: [(String, BusValue)] = [("time", .double(notice.time))]
        if let by = notice.by {
            details.append(("by", .string(by.user.isEmpty ? by.description : by.user)))
            if let uid = by.uid { details.append(("by-uid", .uint32(uid))) }
        }
        if let reason = notice.reason { details.append(("reason", .string(reason))) }
        switch notice.kind {
        case .granted: waitingClaimAnswered(notice.claimID, granted: true, reason: "")
        case .cancelled: waitingClaimAnswered(notice.claimID, granted: false, reason: notice.reason ?? "cancelled")
        case .contention:
            signal([endpoint.peer], path: path, interface: BusAPI.claimInterface, member: "Contention",
                   BusBody(values: [.vardict(details)]))  // fmt: skip
        case .broken, .expired, .lost:
            details.insert(("kind", .string(notice.kind.rawValue)), at: 0)
            signal([endpoint.peer], path: path, interface: BusAPI.claimInterface, member: "Broken",
                   BusBody(values: [.vardict(details)]))  // fmt: skip
        case .returning, .returned:
            let now = notice.kind == .returning ? "returning" : "held"
            signal(
                [endpoint.peer], path: path, interface: StandardBusInterfaces.properties.name,
                member: "PropertiesChanged",
                BusBody(values: [.string(BusAPI.claimInterface), .vardict([("State", .string(now))]), .strings([])]))
        }
    }

    // MARK: Admin methods: the manifest's admins, or polkit's org.accmon.Accmon1.manage

    /// `ReleaseOther(o accessory, s reason)` and `Reload()`: done at once for root and the manifest's admins, else
    /// once polkit allows `org.accmon.Accmon1.manage` (an administrator's authentication).
    func adminCall(_ call: BusCall, _ peer: BusPeer) {
        if state.authorizer.isAdmin(peer.principal) {
            performAdmin(call)
            return
        }
        pendingAdmin[call.id] = call
        enqueueAuthorization(
            id: call.id, peer: peer.name, action: BusAPI.manageAction, details: [:], interactive: call.allowsInteraction)
    }

    /// polkit answered for an admin method.
    func adminAuthorized(_ id: UInt64, _ answer: BusAuthorization) {
        guard let call = pendingAdmin.removeValue(forKey: id) else { return }
        switch answer {
        case .allowed: performAdmin(call)
        case .denied(let why), .unavailable(let why):
            fail(
                call,
                BusError(
                    .accessDenied,
                    "\(call.member): uid \(call.credentials.uid) is neither root nor an admin of the manifest, and \(why)"))
        }
    }

    private func performAdmin(_ call: BusCall) {
        switch call.member {
        case "Reload":
            reloadsWaiting.append((call, manifestLoader.requestLoad()))
        default:
            guard let path = call.arguments[0].text, let connection = BusAPI.connectionID(ofPath: path) else {
                fail(call, BusError(.invalidArguments, "ReleaseOther: accessory: not an accessory object's path"))
                return
            }
            guard let claims = state.claims, let number = claims.book.holding[connection] else {
                fail(call, BusError(.gone, "ReleaseOther: \(path): nobody holds it"))
                return
            }
            let reason = call.arguments[1].text ?? ""
            let actor = Party(
                user: claims.names.name(of: call.credentials.uid), uid: call.credentials.uid, pid: call.credentials.pid,
                client: "bus \(call.sender)")
            claims.breakClaim(number, by: actor, reason: reason) { [self] in reply(call) }
        }
    }

    /// A manifest load finished: answers the `Reload` calls it covers.
    func manifestLoaded(generation: UInt64, problems: [ManifestProblem]) {
        let answered = reloadsWaiting.filter { $0.generation <= generation }
        reloadsWaiting.removeAll { $0.generation <= generation }
        for (call, _) in answered {
            if problems.isEmpty {
                reply(call)
            } else {
                fail(
                    call,
                    BusError(
                        .failed,
                        "Reload: manifest: \(problems.count) \(problems.count == 1 ? "problem" : "problems"), the previous"
                            + " manifest stays in force: " + problems.map(\.description).joined(separator: "; ")))
            }
        }
    }

    // MARK: After a restart

    /// The peers whose claims wait for them after a restart of accmond (or a lost bus connection) on the bus `busID`.
    func claimHolders(on busID: String) -> Set<String> {
        guard let claims = state.claims else { return [] }
        var names = Set<String>()
        for claim in claims.book.claims.values where claim.holder.session == nil && claim.holder.bus?.busID == busID {
            if let peer = claim.holder.bus?.peer { names.insert(peer) }
        }
        for waiter in claims.book.waiters where waiter.claimant.session == nil && waiter.claimant.bus?.busID == busID {
            if let peer = waiter.claimant.bus?.peer { names.insert(peer) }
        }
        return names
    }

    /// A peer still on the bus takes up its claims and places in line by itself, with their tokens, on a claim
    /// session of its own: its descriptors were never cut.
    func takeUpClaims(of peer: BusPeer) {
        guard let claims = state.claims, let busID else { return }
        let tokens =
            claims.book.claims.values.filter { $0.holder.session == nil && $0.holder.bus?.peer == peer.name && $0.holder.bus?.busID == busID }
            .map(\.token)
            + claims.book.waiters.filter {
                $0.claimant.session == nil && $0.claimant.bus?.peer == peer.name && $0.claimant.bus?.busID == busID
            }.map(\.token)
        guard !tokens.isEmpty, let session = claimSession(of: peer) else { return }
        for token in tokens {
            let responder = ClaimDesk.ClaimResponder(
                waits: {},
                answer: { [self] response in
                    if case .refused(let error) = response {
                        logger.notice(
                            .busPeer, "bus: \(peer.name) could not take its claim up again: \(error.message)",
                            ["bus.peer": peer.name])
                    }
                })
            claims.request(
                ClaimRequest(.resume(token: token)), by: claims.claimant(of: session, preserve: false), responder: responder)
        }
    }
}
