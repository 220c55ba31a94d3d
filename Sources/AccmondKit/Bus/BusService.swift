import AccmonLogging
import AccmonSys
import AccmonSystemd
import Glibc
import Synchronization

/// accmond on the system bus: a thread of its own, `accmond-bus`, owns the connection (sd-bus), the name
/// `org.accmon.Accmon1` and every bus message; the loop only ever posts and takes plain values, so a bus that is
/// slow, full or gone never holds up the loop (docs/DBUS.md, "Threads").
///
/// Incoming method calls go to the loop with their sender's credentials, which the thread asks the bus driver for at
/// the sender's first call (`GetConnectionCredentials`: `UnixUserID`, `UnixGroupIDs`, `ProcessID`) and forgets when
/// the sender leaves the bus. What the loop posts (replies, signals) is sent in the order posted. A connection that
/// is lost, or that takes nothing of what waits to be sent for ``stall`` (the bus stopped reading), is closed and
/// made again after a pause (1 s doubling to 30 s); the loop is told, so that it treats every peer as gone.
final class BusService: Sendable {
    /// Messages written into sd-bus's queue and not yet taken by the bus, past which the thread writes no more until
    /// the bus has read some: what waits beyond stays in ``BusOutbox`` as the loop's compact values (an event is a
    /// reference), not as serialized messages.
    static let writeQueueBound: UInt64 = 1024
    /// How long the bus may take nothing while messages wait (``DaemonLimits/busStallSeconds``), in nanoseconds:
    /// then it counts as stuck, and the connection is closed and made again, every peer treated as gone
    /// (docs/DBUS.md, "Limits"). What waits meanwhile is bounded by the sessions' own limits: a subscription's
    /// unacknowledged events by `--max-bus-unacknowledged`, calls by the bus's limit of replies each peer may await.
    private let stall: UInt64
    private let address: String?
    private let inbound: Mailbox<BusInbound>
    private let outbox = Mutex<[BusOutbound]>([])
    private let wakeup: WakeupEvent
    private let logger: Logger

    /// Starts the thread, which connects at once. `address` nil: the system bus (`DBUS_SYSTEM_BUS_ADDRESS`, else
    /// `/run/dbus/system_bus_socket`).
    init(address: String?, stallSeconds: Double, inbound: Mailbox<BusInbound>, logger: Logger) throws(Errno) {
        self.address = address
        stall = UInt64(stallSeconds * 1e9)
        self.inbound = inbound
        self.logger = logger
        wakeup = try WakeupEvent()
        try startThread(name: "accmond-bus") { [self] in run() }
    }

    /// Queues messages for the thread, in order. Safe from any thread.
    func post(_ items: [BusOutbound]) {
        guard !items.isEmpty else { return }
        outbox.withLock { $0 += items }
        wakeup.signal()
    }

    // MARK: The thread

    /// The thread's state: the connection and what belongs to it.
    private final class Link {
        let connection: BusConnection
        let busID: String
        /// Calls waiting for the loop's answer, by the id the loop was given.
        var calls: [UInt64: BusMessage] = [:]
        /// Credentials of the peers that called, by unique name.
        var peers: [String: BusCredentials] = [:]

        init(_ connection: BusConnection, busID: String) {
            self.connection = connection
            self.busID = busID
        }
    }

    private func run() {
        var link: Link?
        var nextCallID: UInt64 = 1
        var pause: Int32 = 1000
        var retryAt: UInt64 = 0
        var pending = BusOutbox()
        var polkit = PolkitChecks()
        var progress = StallWatch()
        while true {
            if link == nil, monotonicNanoseconds() >= retryAt {
                do {
                    link = try connect()
                    progress = StallWatch()
                    pause = 1000
                } catch {
                    logger.warning(
                        .bus, "bus: cannot serve \(BusAPI.serviceName) on \(address ?? "the system bus"): \(error);"
                            + " trying again in \(pause / 1000) s")
                    retryAt = monotonicNanoseconds() + UInt64(pause) * 1_000_000
                    pause = min(pause * 2, 30_000)
                }
            }
            var waits = [pollfd(fd: wakeup.descriptor.rawValue, events: Int16(POLLIN), revents: 0)]
            var timeout: Int32 = -1
            if let link {
                waits.append(pollfd(fd: link.connection.descriptor.rawValue, events: link.connection.pollEvents, revents: 0))
                // More to send and room in sd-bus's queue: look and go on at once; else wait for the bus.
                let canWrite = (link.connection.queuedWriteCount ?? 0) < Self.writeQueueBound
                timeout = pending.isEmpty || !canWrite ? link.connection.millisecondsUntilTimeout() ?? -1 : 0
                // sd-bus asks for no POLLIN while its read queue holds messages (read during a synchronous call):
                // those are taken at once.
                if link.connection.pollEvents & Int16(POLLIN) == 0 { timeout = 0 }
                if let due = polkit.millisecondsUntilDeadline(now: monotonicNanoseconds()) {
                    timeout = timeout < 0 ? due : min(timeout, due)
                }
                if !pending.isEmpty {  // wake up to find the bus stuck even when nothing else happens
                    let due = progress.millisecondsUntilStalled(after: stall, now: monotonicNanoseconds())
                    timeout = timeout < 0 ? due : min(timeout, due)
                }
            } else {
                let now = monotonicNanoseconds()
                timeout = retryAt > now ? Int32(min((retryAt - now) / 1_000_000 + 1, 30_000)) : 0
            }
            let ready = waits.withUnsafeMutableBufferPointer { poll($0.baseAddress, nfds_t($0.count), timeout) }
            wakeup.drain()
            // sd-bus has something to do only when its socket is ready, its read queue holds messages, or a timeout
            // of its own is due: woken by the loop alone, the thread sends and does not ask sd-bus to read (an
            // empty recvmsg per wake-up, a cost on every event's path).
            let busReady = ready == 0 || waits.count < 2 || waits[1].revents != 0 || waits[1].events & Int16(POLLIN) == 0
            let items = outbox.withLock { posted in
                defer { posted = [] }
                return posted
            }
            guard let current = link else {
                // No connection: what the loop sends meanwhile is for peers that are gone.
                pending.take(items) { _ in nil }
                let refused = pending.removeAll().map { BusInbound.authorized(id: $0, .unavailable("polkit: no bus")) }
                if !refused.isEmpty { inbound.post(refused) }
                continue
            }
            pending.take(items) { current.calls[$0]?.sender }
            var received: [BusInbound] = []
            do {
                for name in pending.takeProbes() {
                    if let credentials = credentials(of: name, on: current) {
                        received.append(.peerPresent(name, credentials))
                    }
                }
                for check in pending.takeAuthorizations() {
                    if let answer = polkit.start(
                        id: check.id, peer: check.peer, action: check.action, details: check.details,
                        interactive: check.interactive, on: current.connection)
                    {
                        received.append(.authorized(id: answer.id, answer.1))
                    }
                }
                let now = monotonicNanoseconds()
                progress.observe(queued: current.connection.queuedWriteCount ?? 0, waiting: !pending.isEmpty, now: now)
                try send(&pending, on: current)
                progress.sent(queued: current.connection.queuedWriteCount ?? 0)
                if busReady { try receive(on: current, into: &received, nextCallID: &nextCallID, polkit: &polkit) }
                for (id, answer) in polkit.expired(now: monotonicNanoseconds()) {
                    received.append(.authorized(id: id, answer))
                }
                if progress.isStalled(after: stall, now: now) {
                    throw SystemdBusError(
                        name: "",
                        message: "the bus took nothing of what accmond sends for \(stall / 1_000_000_000) s"
                            + " (\(pending.count) messages wait): it does not read")
                }
            } catch {
                logger.warning(.bus, "bus: connection lost: \(error); connecting again in \(pause / 1000) s")
                received.append(.disconnected(reason: "\(error)"))
                link = nil
                for id in pending.removeAll() { received.append(.authorized(id: id, .unavailable("polkit: no bus"))) }
                for (id, answer) in polkit.cancelAll("the bus connection was lost") {
                    received.append(.authorized(id: id, answer))
                }
                retryAt = monotonicNanoseconds() + UInt64(pause) * 1_000_000
            }
            if !received.isEmpty { inbound.post(received) }
        }
    }

    /// Connects, learns the bus's id, asks for `NameOwnerChanged` of departing peers, and takes the name.
    private func connect() throws(SystemdBusError) -> Link {
        let connection = try BusConnection(address: address)
        guard case .string(let busID)? = try connection.callDriver("GetId", []).first else {
            throw SystemdBusError(name: "", message: "GetId: no id in the reply")
        }
        // One rule for every name that loses its owner: a peer that leaves (its unique name's owner becomes "").
        let rule =
            "type='signal',sender='org.freedesktop.DBus',path='/org/freedesktop/DBus',"
            + "interface='org.freedesktop.DBus',member='NameOwnerChanged',arg2=''"
        _ = try connection.callDriver("AddMatch", [.string(rule)])
        try connection.requestName(BusAPI.serviceName)
        let link = Link(connection, busID: busID)
        logger.notice(
            .bus, "bus: serving \(BusAPI.serviceName) as \(connection.uniqueName) on \(address ?? "the system bus")",
            ["bus.id": busID])
        inbound.post([.connected(busID: busID, uniqueName: connection.uniqueName)])
        return link
    }

    /// Sends what waits, one message per peer in turn, for at most ``sendingSlice`` and while sd-bus's queue is under
    /// ``writeQueueBound``: then the thread reads what arrived and takes what the loop posted before it sends on, so
    /// that no peer's flood holds up the others'.
    private func send(_ pending: inout BusOutbox, on link: Link) throws(SystemdBusError) {
        let connection = link.connection
        let until = monotonicNanoseconds() + Self.sendingSlice
        while (connection.queuedWriteCount ?? 0) < Self.writeQueueBound, let entry = pending.next() {
            switch entry {
            case .reply(let id, let values, let descriptors):
                // sd-bus duplicates a passed descriptor: this one is closed whatever happens.
                defer { for descriptor in descriptors { descriptor.close() } }
                guard let call = link.calls.removeValue(forKey: id) else { continue }
                let reply = try connection.methodReturn(to: call)
                try values.write(reply)
                try connection.send(reply)
            case .error(let id, let error):
                guard let call = link.calls.removeValue(forKey: id) else { continue }
                try connection.send(connection.methodError(to: call, name: error.busName, message: error.message))
            case .signal(let destination, let path, let interface, let member, let body):
                let signal = try connection.signal(path: path, interface: interface, member: member, destination: destination)
                if let template = body.template {
                    try signal.appendBody(of: template)
                } else {
                    try body.body.write(signal)
                }
                try connection.send(signal)
                if body.template == nil { body.template = signal }
            }
            if monotonicNanoseconds() >= until { return }
        }
    }

    /// How long the thread sends before it looks at what arrived again.
    static let sendingSlice: UInt64 = 5_000_000

    /// Takes what arrived: method calls (with their sender's credentials) and departures.
    private func receive(
        on link: Link, into received: inout [BusInbound], nextCallID: inout UInt64, polkit: inout PolkitChecks
    ) throws(SystemdBusError) {
        let connection = link.connection
        while let message = try connection.next() {
            switch message.kind {
            case .methodCall:
                guard let sender = message.sender else { continue }
                guard let credentials = credentials(of: sender, on: link) else {
                    if message.expectsReply {
                        let error = BusError(
                            .noCredentials, "\(message.member ?? "call"): the bus did not say who \(sender) is")
                        try connection.send(connection.methodError(to: message, name: error.busName, message: error.message))
                    }
                    continue
                }
                let arguments: [BusValue]
                do {
                    arguments = try message.readArguments()
                } catch {
                    if message.expectsReply {
                        let refusal = BusError(.invalidArguments, "\(message.member ?? "call"): \(error)")
                        try connection.send(
                            connection.methodError(to: message, name: refusal.busName, message: refusal.message))
                    }
                    continue
                }
                let id = nextCallID
                nextCallID += 1
                if message.expectsReply { link.calls[id] = message }
                received.append(
                    .call(
                        BusCall(
                            id: id, sender: sender, credentials: credentials, path: message.path ?? "",
                            interface: message.interface ?? "", member: message.member ?? "",
                            signature: message.signature, arguments: arguments, expectsReply: message.expectsReply,
                            allowsInteraction: message.allowsInteractiveAuthorization)))
            case .signal:
                if message.isSignal("org.freedesktop.DBus", "NameOwnerChanged"),
                    case .string(let name)? = try? message.readArguments().first,  // try?: a malformed one is ignored
                    link.peers.removeValue(forKey: name) != nil
                {
                    received.append(.peerLeft(name))
                } else if message.isSignal("org.freedesktop.DBus", "NameLost"),
                    case .string(let name)? = try? message.readArguments().first, name == BusAPI.serviceName  // try?: as above
                {
                    throw SystemdBusError(name: "", message: "lost the name \(BusAPI.serviceName)")
                }
            case .methodReturn, .error:
                if let (id, answer) = polkit.answer(message) { received.append(.authorized(id: id, answer)) }
            default:
                continue
            }
        }
    }

    /// The peer's credentials, from the cache or the bus driver; `nil` when it is not on the bus (any more).
    private func credentials(of name: String, on link: Link) -> BusCredentials? {
        if let known = link.peers[name] { return known }
        guard let reply = try? link.connection.callDriver("GetConnectionCredentials", [.string(name)]),  // try?: gone
            let entries = reply.first?.stringKeyedEntries, let credentials = BusCredentials(driverReply: entries)
        else { return nil }
        link.peers[name] = credentials
        return credentials
    }
}
