import AccmonDevices
import AccmonLogging
import AccmonManifest
import AccmonProtocol
import AccmonSys

/// What a session subscribed to. A class: the broker asks every session at every event whether it receives it, and
/// a reference is read without copying the filter's strings.
final class Subscription {
    let filter: AccessoryFilter
    /// Whether accessories the manifest rejected are included (an admin's `subscribe` with `all`).
    let includesRejected: Bool

    init(filter: AccessoryFilter, includesRejected: Bool) {
        self.filter = filter
        self.includesRejected = includesRejected
    }
}

/// One client connection, owned by the broker loop.
///
/// A session starts unsubscribed: nothing is sent to it but replies until it subscribes. Once subscribed it is
/// live (events go straight to its outbound buffer) or suspended (events wait in its coalescing queue): suspended
/// because it asked (`suspend`) or because it stopped reading and its outbound buffer reached its bound.
final class Session {
    /// The daemon-wide session number, also its poller token.
    let number: UInt64
    let descriptor: FileDescriptor
    /// The peer's credentials at connect time, when the kernel gave them.
    let peer: PeerCredentials?
    /// Who the client is, for what it may see and do.
    let principal: ClientPrincipal?
    var clientName = ""
    /// Version 1 until `hello` negotiates another: a client that skips `hello` speaks version 1.
    var protocolVersion = 1
    var greeted = false
    /// What the client subscribed to; `nil` while not subscribed.
    var subscription: Subscription?
    var framer = LineFramer()
    /// Lines read but not yet handled: handling waits while the outbound buffer is over its bound.
    var unhandled: [LineFramer.Item] = []
    var outbound: OutboundQueue
    /// Events held while suspended, coalesced; each carries its encoded line.
    var queue = CoalescingQueue<[UInt8]>()
    /// Whether the client sent `suspend` (and not yet `resume`).
    var suspendedByRequest = false
    /// Whether the client shut down its writing side (as `socat` does at the end of its input): the daemon stops
    /// reading but keeps writing replies and events until the client closes.
    var inputClosed = false
    /// What the poller watches on the descriptor now.
    var interest: Interest = .readable
    /// Whether the session is in the broker's list of sessions to flush at the end of this loop turn.
    var flushQueued = false
    /// The user and restore id the client registered in `hello`, if it did.
    var restoreKey: RestoreKey?
    /// For a subscribed session with a restore id: what is needed to hand it back later.
    var memory: SessionMemory?
    /// When the client last sent bytes or took some (monotonic nanoseconds).
    var lastActivity: UInt64
    /// Whether the broker closes the session at the end of this loop turn: nothing more is read, handled or written.
    var isClosing = false

    init(number: UInt64, descriptor: FileDescriptor, peer: PeerCredentials?, outboundLimit: Int, now: UInt64) {
        self.number = number
        self.descriptor = descriptor
        self.peer = peer
        self.principal = ClientPrincipal.of(descriptor, peer: peer)
        self.outbound = OutboundQueue(limit: outboundLimit)
        self.lastActivity = now
    }

    /// Whether an event about `accessory`, on which the manifest gave `verdict`, is this session's: it is subscribed,
    /// its principal may see the accessory, and its filter matches it. A closing session still gets its events: a
    /// restore client's session is kept with them.
    func receives(_ accessory: Accessory, verdict: Authentication) -> Bool {
        guard let subscription,
            verdict.isVisible(to: principal, includingRejected: subscription.includesRejected)
        else { return false }
        return subscription.filter.matches(accessory)
    }

    /// Whether events wait in the queue instead of going out.
    var isSuspended: Bool { suspendedByRequest || !queue.isEmpty }

    /// Whether the outbound buffer has reached its bound: no more events go in, and requests wait.
    var outboundIsFull: Bool { outbound.byteCount >= outbound.limit }

    /// The id the protocol shows, such as `s-7`.
    var sessionID: String { "s-\(number)" }

    /// The session as `status` shows it.
    func status(now: UInt64) -> SessionStatus {
        SessionStatus(
            sessionID: sessionID, clientName: clientName, pid: peer?.pid ?? 0, uid: peer?.uid ?? 0,
            state: isSuspended ? .suspended : .live,
            suspendedBecause: suspendedByRequest ? "requested" : (queue.isEmpty ? "" : "not-reading"),
            subscribed: subscription != nil, queuedEvents: queue.count, outboundBytes: outbound.byteCount,
            idleSeconds: Double(now &- lastActivity) / 1e9)
    }

    /// Log metadata naming the client.
    var metadata: [String: String] {
        var metadata = ["session": sessionID]
        if let peer {
            metadata["client.pid"] = String(peer.pid)
            metadata["client.uid"] = String(peer.uid)
        }
        if !clientName.isEmpty { metadata["client.name"] = clientName }
        if let restoreKey { metadata["restore.id"] = restoreKey.restoreID }
        return metadata
    }
}
