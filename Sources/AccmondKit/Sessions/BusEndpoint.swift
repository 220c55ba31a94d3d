import AccmonProtocol

/// Where a bus subscription's events go and what its subscriber has not acknowledged yet.
///
/// On the socket, a client that stops reading shows as a full socket; on the bus it does not: dbus-daemon queues a
/// peer's messages up to its own limit and then drops signals silently. So a bus subscription's outbound buffer holds
/// its events until the subscriber acknowledges them (`Ack`), and a subscriber that does not acknowledge within the
/// buffer's bound (`--max-client-buffer`) is suspended as one that does not read: its events are queued and
/// coalesced until it acknowledges again.
final class BusEndpoint {
    /// The subscriber's unique name on the bus, such as `:1.42`.
    let peer: String
    /// The id of the bus the peer is on (`GetId`): a unique name means that peer only on that bus.
    let busID: String
    /// The subscription object's path.
    let objectPath: String
    /// Events appended to the outbound buffer and not yet posted to the bus, with their line's size.
    var unposted: [(event: AccessoryEvent, bytes: Int)] = []
    /// Events posted and not acknowledged, oldest first, with their line's size.
    var unacknowledged: [(sequence: UInt64, bytes: Int)] = []
    /// The highest sequence the subscriber acknowledged.
    var acknowledged: UInt64 = 0
    /// The state (`live`, `suspended`) the subscriber was last told of.
    var announcedState = "live"
    /// Whether events wait while the subscriber's login session is not in front (`suspend-while-inactive`).
    var followsLogin = false

    init(peer: String, busID: String, objectPath: String) {
        self.peer = peer
        self.busID = busID
        self.objectPath = objectPath
    }

    /// The peer and object, as a preserved session keeps them.
    var identity: BusPeerIdentity { BusPeerIdentity(peer: peer, busID: busID, objectPath: objectPath) }
}
