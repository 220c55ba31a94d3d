/// The daemon's limits: what one client, one user, and all clients together may hold. Each has a flag (accmond(8))
/// and a default; docs/PROTOCOL.md §10 lists them.
public struct DaemonLimits: Sendable, Equatable {
    /// Client connections open at once; past it a new connection gets `too-many-connections` and is closed.
    public var connections = 1024
    /// Client connections of one user (root excepted) open at once; past it, as for ``connections``.
    public var connectionsPerUser = 64
    /// Connections one user (root excepted) may make per second, after a burst of ``connectionsPerUser``; past it
    /// its further connections wait in the listening socket's backlog (the loop stops accepting for the time that
    /// takes). Refused connections count. 0: no limit.
    public var connectsPerUserPerSecond = 1000
    /// Bytes buffered for one client. An event that does not fit suspends the client (its events are queued and
    /// coalesced until it reads), and its requests wait until there is room for their replies.
    public var clientOutputBytes = 256 << 10
    /// Bytes buffered for all clients together. While they hold more, a client holding more than its share (this
    /// budget divided by the clients) is suspended as one that does not read, and its requests wait: the clients
    /// holding the most unread output stop first, and one that reads keeps getting its events.
    public var totalOutputBytes = 64 << 20
    /// Request lines handled for one client in one turn of the loop; the rest wait for the next turn, after every
    /// other client's.
    public var requestsPerTurn = 32
    /// The fraction of the loop's time the requests of one user (root excepted) may take, after a burst of 100 ms
    /// ahead of it; past it that user's request lines wait until it is back within its share. 0: no limit.
    public var loopSharePerUser = 0.25
    /// Bytes of replies one client's requests may queue in one turn of the loop: past them its further request lines
    /// wait for the next turn, as past ``requestsPerTurn``. Encoding a reply costs the loop about in proportion to
    /// its size, so a flood of large replies (`list`, `status`, `history`) takes as short a turn as one of small ones.
    public static let replyBytesPerTurn = 16 << 10
    /// Bytes of events (counted as their protocol lines) one bus subscription may have been sent and not yet
    /// acknowledged; past it the subscriber is suspended as a socket client that does not read. Larger than
    /// ``clientOutputBytes``: an acknowledgement comes back through dbus-daemon and the subscriber's own loop, long
    /// after a socket client's read, so a subscriber that acknowledges every signal is many events behind in a
    /// burst; and what it holds are references to lines every session shares, not copies.
    public var busUnacknowledgedBytes = 4 << 20
    /// Seconds the system bus may take nothing of what accmond has to send (its socket full, nothing written) before
    /// accmond counts it as stuck: the connection is closed and made again, and every bus peer counts as gone
    /// (restore ids preserved). A bus that reads, however slowly, is never dropped for what waits.
    public var busStallSeconds = 30.0
    /// Sessions kept for restore ids of gone clients, in all; past it the oldest of the user who keeps the most is
    /// dropped.
    public var preservedSessions = 1024
    /// Sessions kept for restore ids of one user's gone clients; past it that user's oldest is dropped.
    public var preservedSessionsPerUser = 32
    /// Own sessions that `status` lists to a client that is not an admin; the rest are counted.
    public static let statusSessions = 100
    /// The longest restore id, in bytes of UTF-8.
    public static let restoreIDBytes = 255

    public init() {}
}
