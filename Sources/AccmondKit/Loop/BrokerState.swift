import AccmonLogging
import AccmonProtocol
import AccmonSys

/// The broker's state, owned by the loop's thread: the registry (the daemon's truth), the manifest in force, the live
/// and preserved sessions. Its parts (``BrokerLoop``, ``RequestHandler``, ``Publisher``, ``Persistence``) are types
/// of their own that share it; nothing here blocks.
final class BrokerState {
    let configuration: DaemonConfiguration
    var logger: Logger { configuration.logger }
    let codec = ProtocolCodec()
    let startedAt = monotonicNanoseconds()
    /// The source `simulate` requests drive; `nil` without `--simulate`.
    let simulated: SimulatedEventSource?
    var registry = Registry()
    var authorizer = Authorizer()
    var preserved: PreservedSessions
    let sessions: SessionTable
    /// What happened to the accessories (connects, disconnects, rejections, claims), bounded and persisted.
    let history: History
    /// Launch on connect and relaunch (set by the loop once persistence exists).
    var launcher: Launcher?
    /// Check-out: claims, the line of claimers, enforcement on the nodes (set by the loop once persistence exists).
    var claims: ClaimDesk?
    /// accmond on the system bus (`--dbus`; set by the loop once the other parts exist).
    var bus: BusFrontend?

    init(configuration: DaemonConfiguration, simulated: SimulatedEventSource?, history: History) {
        self.configuration = configuration
        self.simulated = simulated
        self.history = history
        preserved = PreservedSessions(
            retentionSeconds: configuration.restoreRetentionSeconds, limit: configuration.limits.preservedSessions,
            limitPerUser: configuration.limits.preservedSessionsPerUser)
        sessions = SessionTable(
            logger: configuration.logger, outputBudget: configuration.limits.totalOutputBytes,
            loopShare: LoopShare(share: configuration.limits.loopSharePerUser))
    }

    /// Queues `message` as a reply to `session`, to be written at the end of the turn.
    func reply(to session: Session, _ message: ServerMessage) {
        session.queueOutput(codec.encode(message))
        sessions.queueFlush(session)
    }
}

/// Log metadata naming an accessory.
func metadata(for accessory: Accessory) -> [String: String] {
    [
        "accessory.id": accessory.accessoryID, "connection.id": accessory.connectionID.description,
        "accessory.sysfs": accessory.sysfsPath,
    ]
}
