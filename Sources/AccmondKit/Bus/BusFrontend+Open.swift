import AccmonLogging
import AccmonProtocol
import AccmonSys
import AccmonSystemd

/// An `Open` on its way: checked, then authorized, then claimed, then the node opened (docs/DBUS.md, "Opening an
/// accessory").
final class PendingOpen {
    let call: BusCall
    let peer: BusPeer
    let connection: ConnectionID
    let node: String
    let options: BusOpenOptions
    /// Whether the node is a simulated accessory's (opened by accmond's own keeper).
    let simulated: Bool
    /// The claim, once granted or queued.
    var claimID: String?

    init(call: BusCall, peer: BusPeer, connection: ConnectionID, node: String, options: BusOpenOptions, simulated: Bool) {
        self.call = call
        self.peer = peer
        self.connection = connection
        self.node = node
        self.options = options
        self.simulated = simulated
    }

    var method: String { call.member }
}

/// The `Open`s in progress, by their call; and by what they wait for.
struct PendingOpens {
    var byCall: [UInt64: PendingOpen] = [:]
    /// Waiting for polkit, by the check's id (the call's).
    var authorizing: Set<UInt64> = []
    /// Waiting in line, by claim id.
    var waiting: [String: UInt64] = [:]
}

extension BusFrontend {
    /// `Open(s node, a{sv} options) → (h fd, o claim)` and `OpenProtocol(s protocol, a{sv} options)`: claims the
    /// accessory for the caller and hands it a descriptor of the node, opened by whoever holds it (the helper for a
    /// real device, accmond for a simulated one).
    func open(_ call: BusCall, _ peer: BusPeer, _ connection: ConnectionID) {
        let method = call.member
        let options: BusOpenOptions
        do {
            options = try BusOpenOptions(call.arguments[1], method: method)
        } catch {
            fail(call, error)
            return
        }
        guard let accessory = visibleAccessory(connection, to: peer) else {
            fail(call, BusError(.gone, "\(method): accessory \(connection): not connected"))
            return
        }
        let wanted = call.arguments[0].text ?? ""
        let node: String
        if method == "OpenProtocol" {
            guard accessory.protocolStrings.contains(wanted) else {
                let spoken = accessory.protocolStrings.isEmpty ? "none" : accessory.protocolStrings.joined(separator: ", ")
                fail(call, BusError(.noSuchProtocol, "\(method): '\(wanted)': accessory \(connection) speaks \(spoken)"))
                return
            }
            guard let first = accessory.deviceNodes.first else {
                fail(call, BusError(.noSuchNode, "\(method): accessory \(connection) has no device node"))
                return
            }
            node = first
        } else if wanted.isEmpty {
            guard let first = accessory.deviceNodes.first else {
                fail(call, BusError(.noSuchNode, "\(method): accessory \(connection) has no device node"))
                return
            }
            node = first
        } else {
            guard accessory.deviceNodes.contains(wanted) else {
                fail(
                    call,
                    BusError(
                        .noSuchNode,
                        "\(method): '\(wanted)' is not a node of accessory \(connection) (its nodes: "
                            + "\(accessory.deviceNodes.joined(separator: ", ")))"))
                return
            }
            node = wanted
        }
        if options.releaseWhenInactive, let refusal = loginRefusal(method, "release-when-inactive") {
            fail(call, refusal)
            return
        }
        guard let claims = state.claims else {
            fail(call, BusError(.failed, "\(method): claims are not available"))
            return
        }
        // A user's Opens in progress (checked, authorized, waiting in line) are bounded as its sessions are: each
        // waits with a claim request, which the socket's clients make one at a time per connection.
        let uid = peer.credentials.uid
        let limit = state.configuration.limits.connectionsPerUser
        if uid != 0, opens.byCall.values.lazy.filter({ $0.peer.credentials.uid == uid }).count >= limit {
            fail(
                call,
                BusError(
                    .limitReached,
                    "\(method): uid \(uid) has \(limit) Opens in progress or waiting in line (--max-connections-per-user)"))
            return
        }
        let simulated = state.registry.key(of: connection)?.hasPrefix(SimulatedEventSource.keyPrefix) ?? false
        let pending = PendingOpen(
            call: call, peer: peer, connection: connection, node: node, options: options, simulated: simulated)
        opens.byCall[call.id] = pending
        // The caller's own claim on it: another descriptor on the same claim.
        if let session = peer.claimSession, let number = claims.book.holding[connection],
            claims.book.claims[number]?.holder.session == session.number
        {
            pending.claimID = "c-\(number)"
            openNode(pending)
            return
        }
        // Whether the caller could open the node by its own permissions decides whether polkit is asked.
        let principal = peer.principal
        let batch = claims.nodes.submit([
            (.permits(node, uid: principal.uid, gids: principal.gids, readOnly: options.readOnly), simulated)
        ])
        claims.awaiting[batch] = { [self] result in
            guard opens.byCall[call.id] === pending else { return }
            switch result.results.first?.permitted {
            case true?: claim(pending)
            case false?:
                opens.authorizing.insert(call.id)
                enqueueAuthorization(
                    id: call.id, peer: peer.name, action: BusAPI.openAction,
                    details: ["accessory": accessory.name.isEmpty ? accessory.accessoryID : accessory.name, "node": node],
                    interactive: call.allowsInteraction)
            case nil:
                let why: String
                if case .failed(let text)? = result.results.first?.step { why = text } else { why = "cannot look at it" }
                finishOpen(pending, BusError(.failed, "\(method): \(node): \(why)"))
            }
        }
    }

    /// polkit answered for an `Open`.
    func openAuthorized(_ id: UInt64, _ answer: BusAuthorization) {
        guard opens.authorizing.remove(id) != nil, let pending = opens.byCall[id] else { return }
        switch answer {
        case .allowed:
            claim(pending)
        case .denied(let why), .unavailable(let why):
            logger.info(
                .busPeer, "bus: \(pending.method) of \(pending.node) refused: \(why)",
                ["bus.peer": pending.peer.name, "client.uid": String(pending.peer.credentials.uid)])
            finishOpen(
                pending,
                BusError(
                    .notAuthorized,
                    "\(pending.method): \(pending.node): uid \(pending.peer.credentials.uid) may not open it by its own"
                        + " permissions, and \(why)"))
        }
    }

    /// Claims the accessory for the caller (its peer's claim session), as `accmon claim` would.
    private func claim(_ pending: PendingOpen) {
        guard let claims = state.claims, let session = claimSession(of: pending.peer) else {
            finishOpen(pending, BusError(.failed, "\(pending.method): accmond is not on the bus"))
            return
        }
        let request = ClaimRequest(
            .connections([pending.connection]), wait: pending.options.wait, reason: pending.options.reason,
            maxSeconds: pending.options.maxSeconds, preserve: false)
        let responder = ClaimDesk.ClaimResponder(
            waits: {},
            answer: { [self] response in
                guard opens.byCall[pending.call.id] === pending else { return }
                switch response {
                case .claim(let info) where info.state == .waiting:
                    pending.claimID = info.claimID
                    opens.waiting[info.claimID] = pending.call.id
                case .claim(let info):
                    pending.claimID = info.claimID
                    if pending.options.releaseWhenInactive { releaseWhenInactive(info.claimID, pending.peer) }
                    openNode(pending)
                case .refused(let error):
                    finishOpen(pending, Self.busError(for: error, pending.method))
                }
            })
        claims.request(request, by: claims.claimant(of: session, preserve: false), responder: responder)
    }

    /// A waiting `Open`'s claim was granted (or cancelled).
    func waitingClaimAnswered(_ claimID: String, granted: Bool, reason: String) {
        guard let id = opens.waiting.removeValue(forKey: claimID), let pending = opens.byCall[id] else { return }
        if granted {
            if pending.options.releaseWhenInactive { releaseWhenInactive(claimID, pending.peer) }
            openNode(pending)
        } else {
            finishOpen(pending, BusError(.gone, "\(pending.method): \(claimID): \(reason)"))
        }
    }

    /// Opens the held node and replies with its descriptor and the claim's path.
    private func openNode(_ pending: PendingOpen) {
        guard let claims = state.claims, let claimID = pending.claimID, let number = UInt64(claimID.dropFirst(2)) else {
            return
        }
        let batch = claims.nodes.submit([(.open(pending.node, readOnly: pending.options.readOnly), pending.simulated)])
        claims.awaiting[batch] = { [self] result in
            let outcome = result.results.first
            guard opens.byCall[pending.call.id] === pending, claims.book.claims[number] != nil,
                let descriptor = outcome?.descriptor
            else {
                outcome?.descriptor?.close()
                let why: String
                switch outcome?.step {
                case .failed(let text)?, .gone(let text)?, .skipped(let text)?: why = text
                default: why = "the claim ended before the node was opened"
                }
                finishOpen(pending, BusError(claims.book.claims[number] == nil ? .gone : .failed, "\(pending.method): \(why)"))
                return
            }
            opens.byCall[pending.call.id] = nil
            let path = BusAPI.claimPath(number)
            reply(
                pending.call,
                made: BusBody { (message: BusMessage) throws(SystemdBusError) in
                    try message.append(.unixFD(descriptor.rawValue))
                    try message.append(objectPath: path)
                }, passing: [descriptor])
            logger.debug(
                .busPeer, "bus: \(pending.method) of \(pending.node) for \(pending.peer.name)",
                ["claim.id": claimID, "bus.peer": pending.peer.name])
        }
    }

    /// Ends an `Open` with an error (the caller may be gone: then nothing is sent).
    private func finishOpen(_ pending: PendingOpen, _ error: BusError) {
        opens.byCall[pending.call.id] = nil
        opens.authorizing.remove(pending.call.id)
        if let claimID = pending.claimID { opens.waiting[claimID] = nil }
        fail(pending.call, error)
    }

    /// The `Open`s of a peer that left: forgotten (their claims end with the peer's claim session).
    func dropOpens(of peer: BusPeer) {
        for pending in opens.byCall.values where pending.peer === peer {
            opens.byCall[pending.call.id] = nil
            opens.authorizing.remove(pending.call.id)
            if let claimID = pending.claimID { opens.waiting[claimID] = nil }
        }
    }

    /// A claim's error as the bus's.
    static func busError(for error: ProtocolError, _ method: String) -> BusError {
        switch error.code {
        case .claimConflict:
            let prefix = "claim: accessories: "
            let text = error.message.hasPrefix(prefix) ? String(error.message.dropFirst(prefix.count)) : error.message
            return BusError(.held, "\(method): \(text)")
        case .permissionDenied:
            return BusError(.accessDenied, "\(method): \(error.message)")
        case .enforcementFailed:
            return BusError(.failed, "\(method): \(error.message)")
        case .noSuchClaim:
            // Broken or ended before the node was opened.
            return BusError(.gone, "\(method): \(error.message)")
        default:
            return BusError(.failed, "\(method): \(error.code.rawValue): \(error.message)")
        }
    }

    /// The session that holds a peer's claims on the bus (made at its first `Open`): a session of the loop's table,
    /// not subscribed to anything, that ends when the peer leaves the bus (its claims with it: a crashed app's end
    /// at once).
    func claimSession(of peer: BusPeer) -> Session? {
        if let session = peer.claimSession, !session.isClosing { return session }
        guard let busID else { return nil }
        let credentials = peer.credentials
        let session = Session(
            number: state.sessions.takeNumber(),
            transport: .bus(BusEndpoint(peer: peer.name, busID: busID, objectPath: BusAPI.claimsPath)),
            peer: PeerCredentials(pid: credentials.pid, uid: credentials.uid, gid: peer.principal.gids.first ?? 0),
            principal: peer.principal, outboundLimit: state.configuration.limits.clientOutputBytes,
            budget: subscriptionBudget, now: monotonicNanoseconds())
        session.greet(version: WireFormat.supportedVersions.upperBound, clientName: "bus \(peer.name)", restoreKey: nil)
        state.sessions.add(session)
        peer.claimSession = session
        return session
    }
}
