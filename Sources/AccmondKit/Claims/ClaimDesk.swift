import AccmonLogging
import AccmonManifest
import AccmonProtocol
import AccmonSys

/// Check-out on the broker loop: takes the `claim`, `release` and `claims` requests, follows accessories and
/// sessions as they come and go, and acts on what the ``ClaimBook`` decides: enforcement on the device nodes (through
/// the ``NodeGuard``'s thread), replies and notices, `claim-update`s for subscribers, the journal, the state file.
///
/// With no claim and no waiter, the event path pays one check per event (``isIdle``).
final class ClaimDesk {
    let state: BrokerState
    let persistence: Persistence
    var book: ClaimBook
    let nodes: NodeGuard
    let nodeResults: Mailbox<NodeGuard.BatchResult>
    let names: UserNames
    /// How long a claim kept with a preserved session waits for its client (`preserve`).
    let graceSeconds: Double
    /// After a restart, how long holders and waiters have to come back with their token.
    let reclaimSeconds: Double
    /// What waits for a node batch, by batch number: run on the loop when its result comes.
    var awaiting: [UInt64: (NodeGuard.BatchResult) -> Void] = [:]
    /// Connections whose claim changed since subscribers were last told.
    var changed: Set<ConnectionID> = []
    /// Resumes a session's requests once the reply its claim waited for went out (``RequestHandler``'s).
    var resumeRequests: ((Session) -> Void)?
    /// Whether the daemon is stopping: its sessions close, but their claims are kept for their holders to take up
    /// after the restart.
    private(set) var stopping = false

    /// The daemon stops: claims are kept (saved with the state), not ended with their holders' connections.
    func daemonStopping() { stopping = true }
    var logger: Logger { state.logger }

    init(
        state: BrokerState, persistence: Persistence, nodes: NodeGuard, nodeResults: Mailbox<NodeGuard.BatchResult>,
        names: UserNames, graceSeconds: Double, reclaimSeconds: Double
    ) {
        self.state = state
        self.persistence = persistence
        self.nodes = nodes
        self.nodeResults = nodeResults
        self.names = names
        self.graceSeconds = graceSeconds
        self.reclaimSeconds = reclaimSeconds
        book = ClaimBook(makeToken: { randomToken() })
    }

    /// Whether there is no claim and no waiter: the event path then skips the desk.
    var isIdle: Bool { book.claims.isEmpty && book.waiters.isEmpty }

    // MARK: The world the book asks about

    /// The connected accessories clients may claim, as they see them, and who may claim what.
    func world() -> ClaimWorld {
        let authorizer = state.authorizer
        let accessories = state.registry.snapshot().accessories.compactMap { accessory -> Accessory? in
            guard let verdict = authorizer.verdict(accessory.connectionID), verdict.isAllowed else { return nil }
            return verdict.announced(accessory)
        }
        return ClaimWorld(
            connected: accessories, mayClaim: { [state] in Self.mayClaim($0, $1, authorizer: state.authorizer) },
            sees: { [state] claimant, accessory in
                if let remote = claimant.remoteUser {
                    return Self.policy(of: accessory, authorizer: state.authorizer).allowsRemote(remote)
                }
                return state.authorizer.verdict(accessory.connectionID)?.isVisible(
                    to: claimant.principal, includingRejected: false, accounts: state.authorizer.accounts) ?? false
            },
            policy: { [state] in Self.policy(of: $0, authorizer: state.authorizer) },
            simulated: { [state] in
                state.registry.key(of: $0.connectionID)?.hasPrefix(SimulatedEventSource.keyPrefix) ?? false
            }, now: monotonicNanoseconds(), wallNow: wallClockSeconds())
    }

    static func policy(of accessory: Accessory, authorizer: Authorizer) -> ClaimPolicy {
        guard case .allowed(let entryName, _, _)? = authorizer.verdict(accessory.connectionID) else { return .default }
        return authorizer.manifest.entry(named: entryName)?.effectiveClaim ?? .default
    }

    /// Whether `claimant` may claim `accessory`: an allowed accessory, which a local claimer sees and the entry's
    /// claim list admits, or which the entry's `remote` list lets the remote user claim.
    static func mayClaim(_ claimant: Claimant, _ accessory: Accessory, authorizer: Authorizer) -> Bool {
        guard case .allowed(let entryName, _, let access)? = authorizer.verdict(accessory.connectionID) else {
            return false
        }
        let policy = authorizer.manifest.entry(named: entryName)?.effectiveClaim ?? .default
        if let remote = claimant.remoteUser { return policy.allowsRemote(remote) }
        guard let principal = claimant.principal else { return false }
        return policy.allowsLocal(
            uid: principal.uid, gids: principal.gids, entryAccess: access, accounts: authorizer.accounts)
    }

    /// The party a session is, by the kernel's credentials and the name it gave.
    func party(of session: Session) -> Party {
        Party(
            user: session.peer.map { names.name(of: $0.uid) } ?? "", uid: session.peer?.uid, pid: session.peer?.pid,
            client: session.clientName.isEmpty ? nil : session.clientName)
    }

    // MARK: Requests

    /// `claim`: granted (once enforced), queued, or refused.
    func claim(_ session: Session, id: RequestID?, _ request: ClaimRequest, handler: RequestHandler) {
        var claimant = claimant(of: session, preserve: request.preserve)
        if let remote = request.remoteUser {
            guard let principal = session.principal,
                state.authorizer.manifest.isBridge(uid: principal.uid, gids: principal.gids, accounts: state.authorizer.accounts)
            else {
                handler.reply(
                    to: session, id: id,
                    ProtocolError(
                        .permissionDenied,
                        "claim: remoteUser: \(session.principal?.description ?? "this client") may not claim in a"
                            + " remote user's name: the manifest's bridges do not name it"))
                return
            }
            claimant.party = Party(user: remote, remote: true)
            claimant.remoteUser = remote
        }
        let responder = ClaimResponder(
            waits: { session.awaitsClaim = true },
            answer: { [self] response in
                let waited = session.awaitsClaim
                session.awaitsClaim = false
                defer { if waited { resumeRequests?(session) } }
                guard !session.isClosing else { return }
                switch response {
                case .claim(let info): state.reply(to: session, .claim(id: id, info))
                case .refused(let error): handler.reply(to: session, id: id, error)
                }
            })
        self.request(request, by: claimant, responder: responder)
    }

    /// The claimant a session is: its party and principal, and with `preserve` its restore id.
    func claimant(of session: Session, preserve: Bool) -> Claimant {
        Claimant(
            party: party(of: session), principal: session.principal, remoteUser: nil, session: session.number,
            restoreKey: preserve ? session.restoreKey : nil, awayUntil: nil,
            bus: session.busEndpoint.map { BusPeerIdentity(peer: $0.peer, busID: $0.busID, objectPath: "") })
    }

    /// What a claim request came to, for whoever asked (a socket client's reply, a bus caller's).
    enum ClaimResponse {
        /// Held (enforced and on disk), waiting in line (its place on disk), or taken up again with its token.
        case claim(ClaimInfo)
        /// Refused; held by others: `claim-conflict` with the holders.
        case refused(ProtocolError)
    }

    /// Where a request's answer goes: `waits` when it will come later (after enforcement, after the disk), `answer`
    /// with it.
    struct ClaimResponder {
        var waits: () -> Void
        var answer: (ClaimResponse) -> Void
    }

    /// A claim request of `claimant` (the socket's `claim`, the bus's `Open`): granted once enforced and on disk,
    /// queued, or refused; a conflict tells the holders.
    func request(_ request: ClaimRequest, by claimant: Claimant, responder: ClaimResponder) {
        if case .resume(let token) = request.target {
            resume(token, by: claimant, responder: responder)
            return
        }
        let world = world()
        switch book.request(request, by: claimant, in: world) {
        case .refused(let error):
            responder.answer(.refused(error))
        case .conflict(let numbers):
            let holders = numbers.compactMap { book.claims[$0] }.map { summary(of: $0, world) }
            tellHolders(numbers, of: .contention, by: claimant.party, reason: request.reason)
            responder.answer(
                .refused(
                    ProtocolError(
                        .claimConflict,
                        "claim: accessories: held: " + holders.map(Self.describe).joined(separator: "; ")
                            + " (ask with wait to wait in line)",
                        holders: holders)))
        case .queued(let waiter):
            let blockers = Set(book.candidates(of: waiter, world).compactMap { book.holding[$0] }).sorted()
            tellHolders(blockers, of: .contention, by: claimant.party, reason: request.reason)
            log(.claimContention, "claim request waits in line", waiter: waiter, blockers: blockers)
            markWaitingChanged(blockers)
            publishChanges()
            // Told once its place in line is on disk, as a grant is.
            let info = info(of: waiter, world)
            responder.waits()
            persistence.whenSaved { responder.answer(.claim(info)) }
        case .granted(let claim):
            responder.waits()
            enforce(claim) { outcome in
                switch outcome {
                case .enforced(let info): responder.answer(.claim(info))
                case .refused(let error): responder.answer(.refused(error))
                }
            }
        }
    }

    private func resume(_ token: String, by claimant: Claimant, responder: ClaimResponder) {
        let world = world()
        switch book.resume(token: token, by: claimant) {
        case .refused(let error): responder.answer(.refused(error))
        case .claim(let number):
            guard let claim = book.claims[number] else { return }
            log(.claimGranted, "claim taken up again by its holder", claim: claim)
            let info = info(of: claim, world)
            responder.waits()
            persistence.whenSaved { responder.answer(.claim(info)) }
        case .waiter(let number):
            guard let waiter = book.waiters.first(where: { $0.number == number }) else { return }
            persistence.markDirty()
            responder.answer(.claim(info(of: waiter, world)))
            // Back in line: what freed up while it was away may be its now.
            finish([], world: world, actor: nil)
        }
    }

    /// `release`: one's own claim or place in line, or, with `force`, an admin's break of another's claim.
    func release(_ session: Session, id: RequestID?, _ request: ReleaseRequest, handler: RequestHandler) {
        let world = world()
        let asker = Claimant(
            party: request.remoteUser.map { Party(user: $0, remote: true) } ?? party(of: session),
            principal: session.principal, remoteUser: request.remoteUser, session: session.number)
        if request.remoteUser != nil,
            !(session.principal.map {
                state.authorizer.manifest.isBridge(uid: $0.uid, gids: $0.gids, accounts: state.authorizer.accounts)
            } ?? false)
        {
            handler.reply(
                to: session, id: id,
                ProtocolError(.permissionDenied, "release: remoteUser: the manifest's bridges do not name this client"))
            return
        }
        let number: UInt64?
        switch request.target {
        case .claim(let claimID):
            number = UInt64(claimID.hasPrefix("c-") ? String(claimID.dropFirst(2)) : claimID)
        case .connection(let connection):
            number = book.holding[connection]
        case .accessory(let accessoryID):
            number = book.claims.values.sorted { $0.number < $1.number }.first {
                $0.items.contains { $0.accessoryID == accessoryID } && isVisible($0, to: session, world)
            }?.number
        }
        if let number, let waiter = book.waiters.first(where: { $0.number == number }),
            waiter.claimant.isSameClaimer(as: asker)
        {
            book.removeWaiter(number)
            markWaitingChanged(Set(book.candidates(of: waiter, world).compactMap { book.holding[$0] }).sorted())
            persistence.markDirty()
            state.reply(to: session, .ok(id: id, connectionID: nil))
            publishChanges()
            return
        }
        guard let number, let claim = book.claims[number], isVisible(claim, to: session, world) else {
            handler.reply(
                to: session, id: id, ProtocolError(.noSuchClaim, "release: \(Self.describe(request.target)): no such claim"))
            return
        }
        if claim.holder.isSameClaimer(as: asker), !request.force {
            let batch = finish([.ended(book.end(number)!, why: .released)], world: world, actor: asker.party)
            answerRelease(session, id: id, once: batch)
        } else if request.force {
            guard handler.requireAdmin(session, id: id, for: "release: force") else { return }
            let why = ClaimEndReason.broken(by: party(of: session), reason: request.reason)
            let batch = finish([.ended(book.end(number)!, why: why)], world: world, actor: party(of: session))
            answerRelease(session, id: id, once: batch)
        } else {
            handler.reply(
                to: session, id: id,
                ProtocolError(
                    .permissionDenied,
                    "release: \(claim.claimID): held by \(claim.holder.party); only its holder releases it (an admin"
                        + " breaks it with force)"))
        }
    }

    /// `claims`: the claims and waiters on accessories the client sees, and its own.
    func list(for session: Session) -> ClaimList {
        let world = world()
        let claims = book.claims.values.sorted { $0.number < $1.number }.filter { isVisible($0, to: session, world) }
        let waiters = book.waiters.filter { waiter in
            waiter.claimant.principal?.uid == session.principal?.uid
                || book.candidates(of: waiter, world).contains { sees(session, $0) }
        }
        return ClaimList(
            claims: claims.map { summary(of: $0, world) },
            waiters: waiters.map { waiterSummary($0, world) })
    }

    /// Whether the client sees `claim`: it sees one of its accessories, or it is the holder's user.
    func isVisible(_ claim: Claim, to session: Session, _ world: ClaimWorld) -> Bool {
        if let uid = session.principal?.uid, claim.holder.principal?.uid == uid, claim.holder.remoteUser == nil {
            return true
        }
        if state.authorizer.isAdmin(session.principal) { return true }
        return claim.connections.contains { sees(session, $0) }
    }

    func sees(_ session: Session, _ connection: ConnectionID) -> Bool {
        state.authorizer.verdict(connection)?.isVisible(
            to: session.principal, includingRejected: false, accounts: state.authorizer.accounts) ?? false
    }

    static func describe(_ target: ReleaseRequest.Target) -> String {
        switch target {
        case .claim(let claimID): "claimID: \(claimID)"
        case .connection(let connection): "connectionID: \(connection)"
        case .accessory(let accessoryID): "accessoryID: \(accessoryID)"
        }
    }

    static func describe(_ summary: ClaimSummary) -> String {
        "\(summary.claimID) of \(summary.holder)\(summary.reason.isEmpty ? "" : ": \"\(summary.reason)\"")"
    }
}

/// 128 random bits as 32 hex digits: a claim's token.
func randomToken() -> String {
    var generator = SystemRandomNumberGenerator()
    return (0..<2).map { _ in
        let word = generator.next() as UInt64
        let hex = String(word, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }.joined()
}

extension ClaimDesk {
    /// The desk for a daemon: its node guard routes simulated accessories' nodes below `--simulated-nodes` to
    /// accmond's own operations and real devices' nodes to the helper (``DaemonConfiguration/nodeOperations``).
    static func make(state: BrokerState, persistence: Persistence, wakeup: WakeupEvent) throws(Errno) -> ClaimDesk {
        let configuration = state.configuration
        let results = Mailbox<NodeGuard.BatchResult>(wakeup: wakeup)
        var routing = configuration.nodeRouting
        routing.recordDirectory = configuration.stateDirectory
        let nodes = try NodeGuard(router: NodeRouter(routing), results: results, logger: configuration.logger)
        let names = try UserNames(
            directory: configuration.accounts, results: Mailbox<(uid: UInt32, name: String)>(wakeup: wakeup))
        return ClaimDesk(
            state: state, persistence: persistence, nodes: nodes, nodeResults: results, names: names,
            graceSeconds: configuration.claimGraceSeconds, reclaimSeconds: configuration.claimReclaimSeconds)
    }
}
