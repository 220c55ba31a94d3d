import AccmonManifest
import AccmonProtocol
import FoundationEssentials

/// What survives a daemon restart: the connected set, the counters, and every session with a restore id.
struct PersistedState: Codable, Sendable, Equatable {
    /// The format version of the file.
    var version = 1
    /// Sequence numbers up to this one may have been issued: the next run starts after it.
    var sequenceCeiling: UInt64
    /// Connection ids up to this one may have been issued.
    var connectionCeiling: UInt64
    var connected: [ConnectedEntry]
    var sessions: [PreservedEntry]
    /// The units started (or to stop) for accessories; absent in files of accmon without launch on connect.
    var launches: [PersistedLaunch]? = nil
    /// The claims and the line; absent in files of accmon without check-out, and when nothing was ever claimed.
    var claims: PersistedClaims? = nil

    struct ConnectedEntry: Codable, Sendable, Equatable {
        var key: String
        var accessory: Accessory
    }

    struct PreservedEntry: Codable, Sendable, Equatable {
        var uid: UInt32
        /// The client's groups, primary first, which decide what it may see.
        var gids: [UInt32]
        var restoreID: String
        var clientName: String
        var filter: AccessoryFilter
        var acknowledged: UInt64
        var known: [Accessory]
        var replay: [ReplayedEvent]
        /// When the session lost its client (wall clock, seconds since the epoch).
        var preservedAt: Double
        /// The template registered for relaunch; absent when none was.
        var relaunch: String? = nil
        /// Whether the subscription asked for claims; absent in files of accmon without check-out.
        var claims: Bool? = nil
        /// For a bus subscription, its peer; absent for the socket's sessions.
        var bus: BusPeerIdentity? = nil
    }

    struct ReplayedEvent: Codable, Sendable, Equatable {
        var change: AccessoryEvent.Change
        var seq: UInt64
        var accessory: Accessory
    }
}

extension PersistedState {
    /// The state as the file holds it: JSON with sorted keys. Written on the store's own thread (and, rarely, at a
    /// counter reservation or at shutdown), so JSONEncoder's speed does not matter here.
    func json() throws -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array(try encoder.encode(self))
    }
}

extension PersistedState.PreservedEntry {
    init(
        key: RestoreKey, clientName: String, gids: [UInt32], memory: SessionMemory, preservedAt: Double,
        relaunch: LaunchTemplate? = nil, bus: BusPeerIdentity? = nil
    ) {
        self.init(
            uid: key.uid, gids: gids, restoreID: key.restoreID, clientName: clientName, filter: memory.filter,
            acknowledged: memory.acknowledged, known: memory.restoreState.accessories,
            replay: memory.replay.events.map {
                PersistedState.ReplayedEvent(change: $0.change, seq: $0.sequence, accessory: $0.accessory)
            },
            preservedAt: preservedAt, relaunch: relaunch?.name, claims: memory.claims ? true : nil, bus: bus)
    }

    /// The memory, its replay re-encoded with `codec`.
    func memory(codec: ProtocolCodec) -> SessionMemory {
        var memory = SessionMemory(
            filter: filter, acknowledged: acknowledged, known: known,
            replay: replay.map { saved in
                let event = AccessoryEvent(saved.change, sequence: saved.seq, accessory: saved.accessory)
                return (event, codec.encode(.event(event)))
            })
        memory.claims = claims ?? false
        return memory
    }
}
