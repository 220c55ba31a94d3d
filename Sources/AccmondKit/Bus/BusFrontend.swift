import AccmonLogging
import AccmonProtocol
import AccmonSys
import AccmonSystemd

/// A peer that called accmond on the bus, as the loop knows it.
final class BusPeer {
    let name: String
    let credentials: BusCredentials
    /// Who it is for the manifest: the same as a socket client with these ids.
    let principal: ClientPrincipal
    /// Whether it gets the object manager's signals (`InterfacesAdded`, `InterfacesRemoved`) and the accessories'
    /// `PropertiesChanged`: once it called `GetManagedObjects`, or read an accessory object.
    var watches = false
    /// Its subscription objects.
    var subscriptions: Set<String> = []
    /// The session that holds its claims (made at its first `Open`).
    var claimSession: Session?
    /// Whether its login session is in front, once logind was asked (``LoginWatcher``).
    var inFront: Bool?

    init(name: String, credentials: BusCredentials) {
        self.name = name
        self.credentials = credentials
        var gids: [UInt32] = []
        for gid in credentials.gids where !gids.contains(gid) { gids.append(gid) }
        principal = ClientPrincipal(uid: credentials.uid, gids: gids)
    }
}

/// accmond's bus service on the loop (docs/DBUS.md): it takes the calls the bus thread (``BusService``) hands over,
/// answers them from the loop's state under the same manifest and limits as the socket's requests, and hands the
/// thread the replies and signals to send, once per loop turn.
///
/// Bus subscriptions are sessions of the loop's ``SessionTable`` like the socket's clients (``SessionTransport/bus(_:)``):
/// the same filter, coalescing queue, memory and restore ids, the same per-user limits. Every signal is sent to the
/// peers that may see what it tells (unicast), never broadcast: a user never receives anything of an accessory the
/// manifest hides from it.
final class BusFrontend {
    let state: BrokerState
    let publisher: Publisher
    let persistence: Persistence
    let inbound: Mailbox<BusInbound>
    let manifestLoader: ManifestLoader
    private let service: BusService
    /// The `Open`s in progress.
    var opens = PendingOpens()
    /// Admin calls waiting for polkit, by the check's id (the call's).
    var pendingAdmin: [UInt64: BusCall] = [:]
    /// Claims to end when their holder's login session is no longer in front, by claim id: the peer.
    var inactiveReleases: [String: String] = [:]
    /// The thread that follows login sessions, from the first peer that asks.
    var loginWatcher: LoginWatcher?
    /// `Reload` calls waiting for the manifest load with at least this generation.
    var reloadsWaiting: [(call: BusCall, generation: UInt64)] = []
    /// What goes to the bus thread at the end of this turn, in order.
    private var outgoing: [BusOutbound] = []
    /// The subscriptions' events of this turn not yet in ``outgoing``: put there before anything else is, as one
    /// `Events` signal per distinct list of events (in a storm, every subscription gets the same list: one message
    /// body written for all).
    private var pendingEvents: [(target: BusSignalTarget, events: [AccessoryEvent])] = []
    /// The id of the bus while connected and the name owned.
    private(set) var busID: String?
    /// The peers that called, by unique name.
    var peers: [String: BusPeer] = [:]
    /// How many peers watch the accessories: zero makes an event cost the bus nothing.
    var watcherCount = 0
    /// The subscription sessions, by object path.
    var subscriptions: [String: Session] = [:]
    /// Calls that wait for their user to be back within its share of the loop, oldest first, and until when.
    private var heldCalls: [BusCall] = []
    private(set) var heldUntil: UInt64?
    /// The budget of bus subscriptions, which never runs out: what a subscription's buffer holds are references to
    /// event lines every session shares, until its subscriber acknowledges them, bounded by `--max-client-buffer`
    /// per subscription. The socket's budget (`--max-output-bytes`) bounds the bytes written for socket clients;
    /// counting a bus subscriber's acknowledgement delay in it would let subscriptions that never acknowledge squeeze
    /// every healthy client's share.
    let subscriptionBudget = OutputBudget(limit: .max)
    /// The most calls that may wait for their users' share; past it a call is refused.
    static let maximumHeldCalls = 4096

    init(
        state: BrokerState, publisher: Publisher, persistence: Persistence, manifestLoader: ManifestLoader,
        address: String?, wakeup: WakeupEvent
    ) throws(Errno) {
        self.state = state
        self.publisher = publisher
        self.persistence = persistence
        self.manifestLoader = manifestLoader
        inbound = Mailbox(wakeup: wakeup)
        service = try BusService(
            address: address, stallSeconds: state.configuration.limits.busStallSeconds, inbound: inbound,
            logger: state.logger)
    }

    var logger: Logger { state.logger }

    // MARK: The loop's turn

    /// Takes what the bus thread handed over: calls, peers gone, the connection's changes.
    func turn() {
        releaseHeldCalls()
        for item in inbound.take() {
            switch item {
            case .connected(let busID, _): connected(busID)
            case .disconnected(let reason): disconnected(reason)
            case .call(let call): take(call)
            case .peerLeft(let name): peerLeft(name)
            case .peerPresent(let name, let credentials): peerPresent(name, credentials)
            case .loginState(let peer, let inFront): loginChanged(peer, inFront: inFront)
            case .authorized(let id, let answer):
                if opens.authorizing.contains(id) {
                    openAuthorized(id, answer)
                } else {
                    adminAuthorized(id, answer)
                }
            }
        }
    }

    /// Hands the turn's replies and signals to the bus thread.
    func finishTurn() {
        postPendingEvents()
        guard !outgoing.isEmpty else { return }
        service.post(outgoing)
        outgoing.removeAll(keepingCapacity: true)
    }

    private func connected(_ busID: String) {
        self.busID = busID
        // Peers still on this bus get their subscriptions back by themselves (an accmond restart, a lost connection).
        let names = Set(state.preserved.sessions.values.compactMap { $0.bus?.busID == busID ? $0.bus?.peer : nil })
            .union(claimHolders(on: busID))
        if !names.isEmpty { enqueue(.probePeers(names.sorted())) }
    }

    private func disconnected(_ reason: String) {
        busID = nil
        for name in Array(peers.keys) { peerLeft(name, reason: "accmond's bus connection was lost: \(reason)") }
        heldCalls.removeAll()
        heldUntil = nil
    }

    /// A peer left the bus: its subscriptions end (those with a restore id are preserved).
    func peerLeft(_ name: String, reason: String = "left the bus") {
        guard let peer = peers.removeValue(forKey: name) else { return }
        if peer.watches { watcherCount -= 1 }
        dropOpens(of: peer)
        loginWatcher?.forget(name)
        inactiveReleases = inactiveReleases.filter { $0.value != name }
        pendingAdmin = pendingAdmin.filter { $0.value.sender != name }
        reloadsWaiting.removeAll { $0.call.sender == name }
        // Its claims end with its claim session: a crashed app's claim ends at once.
        if let session = peer.claimSession { state.sessions.close(session, reason: "bus peer \(name) \(reason)") }
        for path in peer.subscriptions.sorted() {
            if let session = subscriptions[path] { state.sessions.close(session, reason: "bus peer \(name) \(reason)") }
        }
    }

    /// The peer that made `call`, known from now on.
    func peer(of call: BusCall) -> BusPeer {
        if let known = peers[call.sender] { return known }
        let peer = BusPeer(name: call.sender, credentials: call.credentials)
        peers[call.sender] = peer
        if call.credentials.uid != 0 { state.claims?.names.warm(call.credentials.uid) }
        return peer
    }

    /// Makes `peer` a watcher of the accessories.
    func watch(_ peer: BusPeer) {
        guard !peer.watches else { return }
        peer.watches = true
        watcherCount += 1
    }

    // MARK: Calls

    /// Handles a call now, or holds it while its user is over its share of the loop (root excepted), as the
    /// socket's requests are.
    private func take(_ call: BusCall) {
        let uid = call.credentials.uid
        let share = state.sessions.loopShare
        if uid != 0, share.isLimited, let until = share.heldUntil(uid, now: monotonicNanoseconds()) {
            guard heldCalls.count < Self.maximumHeldCalls else {
                fail(call, BusError(.limitReached, "\(call.member): too many calls wait for their users' share of accmond"))
                return
            }
            heldCalls.append(call)
            heldUntil = min(heldUntil ?? until, until)
            return
        }
        handleCharged(call)
    }

    private func handleCharged(_ call: BusCall) {
        let uid = call.credentials.uid
        let limited = uid != 0 && state.sessions.loopShare.isLimited
        let started = limited ? monotonicNanoseconds() : 0
        handle(call)
        if limited {
            let now = monotonicNanoseconds()
            state.sessions.loopShare.charge(uid, nanoseconds: now - started, now: now)
        }
    }

    /// Handles the held calls whose users are back within their share, in order; the others wait on.
    private func releaseHeldCalls() {
        guard let until = heldUntil, until <= monotonicNanoseconds() else { return }
        let waiting = heldCalls
        heldCalls.removeAll()
        heldUntil = nil
        for call in waiting { take(call) }
    }

    /// Replies with `values`.
    func reply(_ call: BusCall, _ values: [BusValue] = []) {
        guard call.expectsReply else { return }
        enqueue(.reply(callID: call.id, BusBody(values: values)))
    }

    /// Replies with what the bus thread writes (a large reply costs the loop nothing but the capture), passing
    /// `descriptors` (which the bus thread closes once sent, or dropped).
    func reply(_ call: BusCall, made body: BusBody, passing descriptors: [FileDescriptor] = []) {
        guard call.expectsReply else {
            for descriptor in descriptors { descriptor.close() }
            return
        }
        enqueue(.reply(callID: call.id, body, descriptors: descriptors))
    }

    /// Asks polkit (on the bus thread); the answer comes back as ``BusInbound/authorized(id:_:)``.
    func enqueueAuthorization(id: UInt64, peer: String, action: String, details: [String: String], interactive: Bool) {
        enqueue(.authorize(id: id, peer: peer, action: action, details: details, interactive: interactive))
    }

    func fail(_ call: BusCall, _ error: BusError) {
        guard call.expectsReply else { return }
        enqueue(.error(callID: call.id, error))
    }

    /// A signal to `destinations`.
    func signal(_ destinations: [String], path: String, interface: String, member: String, _ body: BusBody) {
        guard !destinations.isEmpty else { return }
        enqueue(
            .signal(
                targets: destinations.map { BusSignalTarget(destination: $0, path: path) }, interface: interface,
                member: member, body: body))
    }

    /// Queues a subscription's events, for ``postPendingEvents()``.
    func postEvents(_ events: [AccessoryEvent], to target: BusSignalTarget) {
        pendingEvents.append((target, events))
    }

    /// Appends an item after the pending events, which keeps each peer's order.
    private func enqueue(_ item: BusOutbound) {
        postPendingEvents()
        outgoing.append(item)
    }

    /// Puts the pending events in ``outgoing``: one signal per distinct list, to every subscription that got it.
    private func postPendingEvents() {
        guard !pendingEvents.isEmpty else { return }
        var groups: [(targets: [BusSignalTarget], events: [AccessoryEvent])] = []
        var groupOf: [[UInt64]: Int] = [:]
        for (target, events) in pendingEvents {
            let key = events.map(\.sequence)
            if let index = groupOf[key] {
                groups[index].targets.append(target)
            } else {
                groupOf[key] = groups.count
                groups.append(([target], events))
            }
        }
        pendingEvents.removeAll(keepingCapacity: true)
        for (targets, events) in groups {
            outgoing.append(
                .signal(
                    targets: targets, interface: BusAPI.subscriptionInterface, member: "Events",
                    body: BusBody { (message: BusMessage) throws(SystemdBusError) in
                        try BusAccessoryProperties.writeEvents(events, into: message)
                    }))
        }
    }
}
