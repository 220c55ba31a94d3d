import AccmonLogging
import AccmonManifest
import AccmonProtocol
import AccmonSys

/// What a session subscribed to. A class: every event asks every session whether it receives it, and a reference is
/// read without copying the filter's strings.
final class Subscription {
    let filter: AccessoryFilter
    /// Whether accessories the manifest rejected are included (an admin's `subscribe` with `all`).
    let includesRejected: Bool
    /// Whether the client asked for claims: each accessory's claim, and `claim-update` messages.
    let claims: Bool

    init(filter: AccessoryFilter, includesRejected: Bool, claims: Bool = false) {
        self.filter = filter
        self.includesRejected = includesRejected
        self.claims = claims
    }
}

/// How a session reaches its client: a connection to the Unix socket, or a subscription object on the system bus.
/// One mechanism, two transports: both are sessions of the same table, with the same filter, queue, memory, restore
/// ids and limits; only the way events leave differs.
enum SessionTransport {
    /// A client of the socket: requests and events are lines on this connection.
    case socket(FileDescriptor)
    /// A bus peer's subscription (`Manager.Subscribe`): events leave as `Events` signals to the peer.
    case bus(BusEndpoint)
}

/// One client connection or bus subscription, owned by the broker loop; its state changes through its own methods.
///
/// A session starts unsubscribed: nothing is sent to it but replies until it subscribes. Once subscribed it is
/// live (events go straight to its outbound buffer) or suspended (events wait in its coalescing queue): suspended
/// because it asked (`suspend`) or because it stopped reading and its outbound buffer reached its bound.
///
/// The loop touches a few stored properties once per event and per session (the subscription, memory, queue,
/// outbound buffer and the flags beside them). Those are `@exclusivity(unchecked)`: each dynamic exclusivity check
/// costs about 80 instructions, and at 100 subscribers they were a third of the daemon's instructions per event
/// (bench/README.md, "Instructions"). It is safe because only the loop's thread touches a session and no access to
/// them calls out to code that could reach the same property (OutboundQueue and CoalescingQueue are plain values).
/// Unlike a module-wide `-enforce-exclusivity=unchecked`, the attribute means the same in the debug builds the
/// tests run.
final class Session {
    /// The daemon-wide session number, also its poller token.
    let number: UInt64
    let transport: SessionTransport
    /// The peer's credentials at connect time, when the kernel gave them.
    let peer: PeerCredentials?
    /// Who the client is, for what it may see and do.
    let principal: ClientPrincipal?
    private(set) var clientName = ""
    /// Version 1 until `hello` negotiates another: a client that skips `hello` speaks version 1.
    private(set) var protocolVersion = 1
    private(set) var greeted = false
    /// What the client subscribed to; `nil` while not subscribed.
    @exclusivity(unchecked) private(set) var subscription: Subscription?
    /// The user and restore id the client registered in `hello`, if it did.
    private(set) var restoreKey: RestoreKey?
    /// The unit the client registered for relaunch in `hello` (with its restore id), if it did.
    private(set) var relaunch: LaunchTemplate?
    /// For a subscribed session with a restore id: what is needed to hand it back later.
    @exclusivity(unchecked) private(set) var memory: SessionMemory?
    /// Splits what the client sends into request lines.
    var framer = LineFramer()
    /// Lines read but not yet handled: handling waits while the outbound buffer is over its bound.
    var unhandled = LineQueue()
    @exclusivity(unchecked) private(set) var outbound: OutboundQueue
    /// Events held while suspended, coalesced; each carries its encoded line.
    @exclusivity(unchecked) private(set) var queue = CoalescingQueue<[UInt8]>()
    /// Whether the client sent `suspend` (and not yet `resume`).
    @exclusivity(unchecked) private(set) var suspendedByRequest = false
    /// Whether a bus subscriber that asked for `suspend-while-inactive` is away from its seat (logind).
    @exclusivity(unchecked) private(set) var suspendedForLogin = false
    /// Why events last went to the queue instead of the buffer, while they wait there.
    @exclusivity(unchecked) private(set) var queuedBecause = QueueReason.notReading
    /// The budget all sessions' outbound buffers share.
    let budget: OutputBudget
    /// Request lines handled in the loop turn ``requestTurn``.
    private var requestsInTurn = 0
    private var requestTurn: UInt64 = 0
    /// Bytes of output the requests handled in turn ``requestTurn`` queued.
    private var replyBytesInTurn = 0
    /// Whether the client shut down its writing side (as `socat` does at the end of its input): the daemon stops
    /// reading but keeps writing replies and events until the client closes.
    private(set) var inputClosed = false
    /// Whether a `reload` of this client waits for the manifest to load: its later requests wait too, so that its
    /// replies keep the order of its requests.
    var awaitsReload = false
    /// Whether a `claim` of this client waits for its enforcement on the device nodes: its later requests wait too.
    var awaitsClaim = false
    /// Connections whose claim changed while the session could not take a `claim-update` (suspended, or its buffer
    /// full): their current claim is sent when it is live again.
    var pendingClaimUpdates: Set<ConnectionID> = []
    /// What the poller watches on the descriptor now.
    @exclusivity(unchecked) var interest: Interest = .readable
    /// Whether the session is in the list of sessions to flush at the end of this loop turn.
    @exclusivity(unchecked) var flushQueued = false
    /// Whether the session's request lines wait for the next turn (``SessionTable``'s list).
    var isDeferred = false
    /// Whether the session's request lines wait for its user to be back within its share of the loop.
    var isHeldForShare = false
    /// Whether the session waits for room in the output budget (``SessionTable``'s list).
    @exclusivity(unchecked) var waitsForBudget = false
    /// When the client last sent bytes or took some (monotonic nanoseconds).
    @exclusivity(unchecked) private(set) var lastActivity: UInt64
    /// Whether the session closes at the end of this loop turn: nothing more is read, handled or written.
    @exclusivity(unchecked) private(set) var isClosing = false

    /// A client of the socket.
    convenience init(
        number: UInt64, descriptor: FileDescriptor, peer: PeerCredentials?, outboundLimit: Int, budget: OutputBudget,
        now: UInt64
    ) {
        self.init(
            number: number, transport: .socket(descriptor), peer: peer,
            principal: ClientPrincipal.of(descriptor, peer: peer), outboundLimit: outboundLimit, budget: budget,
            now: now)
    }

    init(
        number: UInt64, transport: SessionTransport, peer: PeerCredentials?, principal: ClientPrincipal?,
        outboundLimit: Int, budget: OutputBudget, now: UInt64
    ) {
        self.number = number
        self.transport = transport
        self.peer = peer
        self.principal = principal
        self.outbound = OutboundQueue(limit: outboundLimit)
        self.budget = budget
        self.lastActivity = now
    }

    /// The socket of a socket client; `nil` for a bus subscription.
    var socket: FileDescriptor? {
        if case .socket(let descriptor) = transport { return descriptor }
        return nil
    }

    /// The bus end of a bus subscription; `nil` for a socket client.
    var busEndpoint: BusEndpoint? {
        if case .bus(let endpoint) = transport { return endpoint }
        return nil
    }

    // MARK: What the client asked for

    /// Records a successful `hello`.
    func greet(version: Int, clientName: String, restoreKey: RestoreKey?, relaunch: LaunchTemplate? = nil) {
        greeted = true
        protocolVersion = version
        self.clientName = clientName
        self.restoreKey = restoreKey
        self.relaunch = restoreKey == nil ? nil : relaunch
    }

    /// Starts the stream; a session with a restore id keeps `memory` from now on.
    func subscribe(_ subscription: Subscription, memory: SessionMemory?) {
        self.subscription = subscription
        self.memory = restoreKey == nil ? nil : memory
    }

    /// Ends the stream and forgets what was queued. Returns whether the session had a memory (now dropped).
    func unsubscribe() -> Bool {
        subscription = nil
        suspendedByRequest = false
        _ = queue.removeAll()
        defer { memory = nil }
        return memory != nil
    }

    /// Takes an acknowledgement; returns whether the session keeps them (only sessions with a restore id do).
    func acknowledge(_ sequence: UInt64) -> Bool {
        guard memory != nil else { return false }
        memory!.acknowledge(sequence)
        return true
    }

    /// `suspend`: events wait in the coalescing queue until `resume`.
    func suspend() { suspendedByRequest = true }

    /// `resume`: the queued events go out as the socket takes them.
    func resume() { suspendedByRequest = false }

    /// Its subscriber's login session left the front (or came back): events wait (or go out again).
    func setSuspendedForLogin(_ suspended: Bool) { suspendedForLogin = suspended }

    /// Takes over a preserved session: its memory and its subscription.
    func handBack(_ kept: PreservedSession) {
        memory = kept.memory
        subscription = Subscription(filter: kept.memory.filter, includesRejected: false, claims: kept.memory.claims)
    }

    /// Gives up the restore id (its preserved session was kept at once, for a new connection to reclaim).
    func releaseRestoreKey() { restoreKey = nil }

    // MARK: Events and output

    /// Whether an event about `accessory`, on which the manifest gave `verdict`, is this session's: it is subscribed,
    /// its principal may see the accessory, and its filter matches it. A closing session still gets its events: a
    /// restore client's session is kept with them.
    func receives(_ accessory: Accessory, verdict: Authentication, accounts: AccountIDs) -> Bool {
        guard let subscription,
            verdict.isVisible(to: principal, includingRejected: subscription.includesRejected, accounts: accounts)
        else { return false }
        return subscription.filter.matches(accessory)
    }

    /// What happened to an event offered with ``deliver(_:line:)``.
    enum Delivery {
        /// Appended to the outbound buffer: the session needs a flush.
        case written
        /// Queued (and coalesced) because the session is suspended.
        case queued
        /// Queued because the outbound buffer is full: the client just stopped reading.
        case stoppedReading
        /// Queued because the clients together hold the whole output budget and this one more than its share.
        case overBudget
        /// Not delivered: the session is closing (its memory, if any, recorded it).
        case dropped
    }

    /// Why a session's events wait in its queue.
    enum QueueReason: String {
        /// Its outbound buffer was full: the client does not read.
        case notReading = "not-reading"
        /// The clients together hold the output budget, this one more than its share.
        case outputBudget = "output-budget"
    }

    /// Records the event in the session's memory (if it has a restore id), then writes it to a live session or
    /// queues it for a suspended one: one that asked, one whose queue is not empty yet (order), or one whose
    /// outbound buffer is full (it stopped reading: suspended from now on).
    func deliver(_ event: AccessoryEvent, line: [UInt8]) -> Delivery {
        memory?.record(event, line: line)
        if isClosing { return .dropped }
        if isSuspended {
            queue.enqueue(event, payload: line)
            return .queued
        }
        guard budget.allows(holding: outbound.byteCount) else {
            queue.enqueue(event, payload: line)
            queuedBecause = .outputBudget
            return .overBudget
        }
        if outbound.fits(line) {
            append(line, event: event)
            return .written
        }
        queue.enqueue(event, payload: line)
        queuedBecause = .notReading
        return .stoppedReading
    }

    /// Appends a reply (or any line that must go out whatever the bound: requests stop being handled while the
    /// buffer is over it, which bounds replies). A bus subscription has no lines but its events: nothing is added.
    func queueOutput(_ line: [UInt8]) {
        guard busEndpoint == nil else { return }
        append(line, event: nil)
    }

    /// Appends an event whatever the bound: the events a restored session missed, which the socket's clients get as
    /// lines queued the same way.
    func queueEvent(_ event: AccessoryEvent, line: [UInt8]) { append(line, event: event) }

    /// Appends to the outbound buffer; a bus subscription also keeps the event, to be posted at its flush. Its
    /// buffer holds the events posted and not acknowledged (``acknowledgeBusEvents(through:)``) as well.
    private func append(_ line: [UInt8], event: AccessoryEvent?) {
        outbound.append(line)
        budget.add(line.count)
        if let event, let endpoint = busEndpoint { endpoint.unposted.append((event, line.count)) }
    }

    /// Moves queued events to the outbound buffer while they fit, unless the client asked to be suspended.
    /// Returns whether that made a suspended session live again.
    func refillFromQueue() -> Bool {
        guard !suspendedByRequest && !suspendedForLogin else { return false }
        let wasSuspended = isSuspended
        while let next = queue.first, outbound.fits(next.payload), budget.allows(holding: outbound.byteCount) {
            append(next.payload, event: next.event)
            _ = queue.popFirst()
        }
        return wasSuspended && !isSuspended
    }

    /// Writes what the socket takes (a socket client's).
    /// - Throws: the socket's error (the client is gone).
    func flushOutput(now: UInt64) throws(Errno) {
        guard let socket else { return }
        let before = outbound.byteCount
        defer { budget.add(outbound.byteCount - before) }
        _ = try outbound.flush(to: socket)
        if outbound.byteCount < before { lastActivity = now }
    }

    /// A bus subscription's events not yet posted to the bus, which now wait for their acknowledgement.
    func takeUnpostedBusEvents() -> [AccessoryEvent] {
        guard let endpoint = busEndpoint, !endpoint.unposted.isEmpty else { return [] }
        defer {
            endpoint.unacknowledged += endpoint.unposted.map { ($0.event.sequence, $0.bytes) }
            endpoint.unposted.removeAll(keepingCapacity: true)
        }
        return endpoint.unposted.map(\.event)
    }

    /// A bus subscriber acknowledged every event up to `sequence`: they leave its buffer (and its memory's replay,
    /// with a restore id). Returns whether anything left the buffer.
    @discardableResult
    func acknowledgeBusEvents(through sequence: UInt64, now: UInt64) -> Bool {
        guard let endpoint = busEndpoint else { return false }
        var bytes = 0
        var count = 0
        for entry in endpoint.unacknowledged {
            guard entry.sequence <= sequence else { break }
            bytes += entry.bytes
            count += 1
        }
        endpoint.unacknowledged.removeFirst(count)
        endpoint.acknowledged = max(endpoint.acknowledged, sequence)
        _ = acknowledge(sequence)
        guard bytes > 0 else { return false }
        outbound.discard(bytes)
        budget.add(-bytes)
        lastActivity = now
        return true
    }

    // MARK: The connection

    /// The client sent bytes.
    func noteInput(now: UInt64) { lastActivity = now }

    /// The client shut down its writing side.
    func closeInput() { inputClosed = true }

    /// Marks the session for closing at the end of the turn. Returns false when it already was.
    func beginClosing() -> Bool {
        guard !isClosing else { return false }
        isClosing = true
        return true
    }

    /// Gives the output still buffered back to the budget (the session is closed).
    func releaseOutput() { budget.add(-outbound.byteCount) }

    /// Takes a slot for one more request line in loop turn `turn`; false when `limit` lines were handled in it, or
    /// when its replies in it already came to `byteLimit` bytes (what a reply costs the loop grows with its size).
    func takeRequestSlot(turn: UInt64, limit: Int, byteLimit: Int) -> Bool {
        if requestTurn != turn {
            requestTurn = turn
            requestsInTurn = 0
            replyBytesInTurn = 0
        }
        guard requestsInTurn < limit, replyBytesInTurn < byteLimit else { return false }
        requestsInTurn += 1
        return true
    }

    /// Counts `bytes` of replies against this turn's ``takeRequestSlot(turn:limit:byteLimit:)``.
    func chargeReplyBytes(_ bytes: Int) { replyBytesInTurn += bytes }

    /// Whether events wait in the queue instead of going out.
    var isSuspended: Bool { suspendedByRequest || suspendedForLogin || !queue.isEmpty }

    /// Whether the outbound buffer has reached its bound: no more events go in, and requests wait.
    var outboundIsFull: Bool { outbound.byteCount >= outbound.limit }

    /// Whether the session may handle its next request line now (its turn's quota aside): its replies have room in
    /// its buffer and in the budget, and it does not wait for a reload.
    var canHandleRequests: Bool {
        !outboundIsFull && !isClosing && !awaitsReload && !awaitsClaim && budget.allows(holding: outbound.byteCount)
    }

    /// Whether a half-closed, unsubscribed session has nothing left to do.
    var isFinished: Bool { inputClosed && subscription == nil && outbound.isEmpty && unhandled.isEmpty }

    /// The id the protocol shows, such as `s-7` (`b-7` for a bus subscription).
    var sessionID: String { busEndpoint == nil ? "s-\(number)" : "b-\(number)" }
}
