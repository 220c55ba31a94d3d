import AccmonSys
import AccmonSystemd

/// Who a bus peer is, as the bus driver says (`GetConnectionCredentials`): its uid, its groups and its process.
struct BusCredentials: Sendable, Hashable {
    var uid: UInt32
    /// The primary group first when the bus gives it, then the supplementary ones (`UnixGroupIDs`).
    var gids: [UInt32]
    var pid: Int32

    /// From the driver's `a{sv}`; `nil` without `UnixUserID`.
    init?(driverReply entries: [(key: String, value: BusValue)]) {
        var uid: UInt32?
        var gids: [UInt32] = []
        var pid: Int32 = 0
        for (key, value) in entries {
            switch (key, value) {
            case ("UnixUserID", .uint32(let number)): uid = number
            case ("ProcessID", .uint32(let number)): pid = Int32(bitPattern: number)
            case ("UnixGroupIDs", .array(_, let items)):
                for case .uint32(let gid) in items where !gids.contains(gid) { gids.append(gid) }
            default: break
            }
        }
        guard let uid else { return nil }
        self.uid = uid
        self.gids = gids
        self.pid = pid
    }

    init(uid: UInt32, gids: [UInt32], pid: Int32) {
        self.uid = uid
        self.gids = gids
        self.pid = pid
    }
}

/// A method call to accmond, as the bus thread hands it to the loop: who called (by unique name and credentials),
/// what, and with what arguments. The loop answers it by its ``id`` with a ``BusOutbound``.
struct BusCall: Sendable {
    var id: UInt64
    var sender: String
    var credentials: BusCredentials
    var path: String
    var interface: String
    var member: String
    var signature: String
    var arguments: [BusValue]
    /// Whether the caller waits for a reply (no `NO_REPLY_EXPECTED` flag).
    var expectsReply: Bool
    /// Whether the caller lets polkit ask its user to authenticate (`ALLOW_INTERACTIVE_AUTHORIZATION`).
    var allowsInteraction = false
}

/// What polkit answered about a caller (`CheckAuthorization`).
enum BusAuthorization: Sendable, Hashable {
    case allowed
    /// Not authorized: why, in words for the caller.
    case denied(String)
    /// polkit could not be asked or did not answer in time: refused, never allowed.
    case unavailable(String)
}

/// What the bus thread tells the loop.
enum BusInbound: Sendable {
    /// Connected, and the name is owned; `busID` is the bus's id (`GetId`), which tells a restarted bus from the one
    /// before (unique names are reused after a dbus-daemon restart).
    case connected(busID: String, uniqueName: String)
    /// The connection was lost or given up: every peer is gone.
    case disconnected(reason: String)
    case call(BusCall)
    /// A peer that called accmond left the bus (`NameOwnerChanged` with no new owner).
    case peerLeft(String)
    /// An answer to ``BusOutbound/probePeers(_:)``: the peer is on the bus, with these credentials.
    case peerPresent(String, BusCredentials)
    /// polkit's answer to ``BusOutbound/authorize(id:peer:action:details:interactive:)``.
    case authorized(id: UInt64, BusAuthorization)
    /// Whether a followed peer's login session is in front (``LoginWatcher``).
    case loginState(peer: String, inFront: Bool)
}

/// The arguments of a reply or a signal, written into the message on the bus thread when it sends it: the loop hands
/// over the values it needs (an accessory is a reference) and never builds D-Bus values of a size that grows with the
/// fleet; the thread writes them straight into sd-bus's message, with no tree of values in between.
struct BusBody: Sendable {
    let write: @Sendable (BusMessage) throws(SystemdBusError) -> Void

    init(_ write: @escaping @Sendable (BusMessage) throws(SystemdBusError) -> Void) { self.write = write }

    /// Arguments made already.
    init(values: [BusValue]) {
        write = { (message: BusMessage) throws(SystemdBusError) in try message.append(values) }
    }
}

/// Where a signal goes: one peer (unicast), one object's path.
struct BusSignalTarget: Sendable, Hashable {
    var destination: String
    var path: String
}

/// What the loop tells the bus thread, in order: replies, signals, probes.
enum BusOutbound: Sendable {
    /// A reply; `descriptors` are what its body passes (`h`), which the bus thread closes once sent or dropped.
    case reply(callID: UInt64, BusBody, descriptors: [FileDescriptor] = [])
    case error(callID: UInt64, BusError)
    /// A signal to each of `targets`, the same arguments for all (written once, copied for the others).
    case signal(targets: [BusSignalTarget], interface: String, member: String, body: BusBody)
    /// Which of these unique names are on the bus now: each present one is answered with
    /// ``BusInbound/peerPresent(_:_:)``.
    case probePeers([String])
    /// Asks polkit whether `peer` is authorized for `action` (`details` for its message), with the user's
    /// interaction when `interactive`; answered with ``BusInbound/authorized(id:_:)``.
    case authorize(id: UInt64, peer: String, action: String, details: [String: String], interactive: Bool)
}
