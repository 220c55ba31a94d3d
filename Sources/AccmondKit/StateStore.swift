import AccmonCore
import AccmonSys
import FoundationEssentials

/// What survives a daemon restart: the connected set, the counters, and every session with a restore id.
struct PersistedState: Codable {
    /// The format version of the file.
    var version = 1
    /// Sequence numbers up to this one may have been issued: the next run starts after it.
    var sequenceCeiling: UInt64
    /// Connection ids up to this one may have been issued.
    var connectionCeiling: UInt64
    var connected: [ConnectedEntry]
    var sessions: [PreservedEntry]

    struct ConnectedEntry: Codable {
        var key: String
        var accessory: Accessory
    }

    struct PreservedEntry: Codable {
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
    }

    struct ReplayedEvent: Codable {
        var change: AccessoryEvent.Change
        var seq: UInt64
        var accessory: Accessory
    }
}

/// Reads and writes the daemon's state file with atomic replacement.
///
/// The broker writes at most every ``StateStore/writeInterval`` (a crash loses at most that much of
/// acknowledgements and session changes; the connected set is re-learnt from the enumeration at start), and at
/// once before sequence numbers or connection ids pass the reserved ceiling, so they keep increasing across
/// restarts whatever the crash point.
struct StateStore {
    /// The most time between a change and its write.
    static let writeIntervalNanoseconds: UInt64 = 100_000_000
    /// How many sequence numbers and connection ids are reserved by one write.
    static let reservation: UInt64 = 100_000

    let path: String
    let logger: Logger

    init(directory: String, logger: Logger) {
        path = directory + "/state.json"
        self.logger = logger
    }

    /// Loads the state; a missing file is a fresh start, a corrupt one is moved aside with a log line.
    func load() -> PersistedState? {
        let bytes: [UInt8]
        do {
            guard let read = try AtomicFile.read(path) else { return nil }
            bytes = read
        } catch {
            logger.error("state: \(error); starting fresh")
            return nil
        }
        do {
            let state = try JSONDecoder().decode(PersistedState.self, from: Data(bytes))
            guard state.version == 1 else {
                throw DaemonError(description: "unknown state format version \(state.version)")
            }
            return state
        } catch {
            let aside = (try? AtomicFile.moveAside(path)) ?? "(could not move it aside)"  // try?: the message says so
            logger.error("state: '\(path)': unreadable (\(Self.reason(error))); moved to '\(aside)', starting fresh")
            return nil
        }
    }

    func save(_ state: PersistedState) {
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            try AtomicFile.write([UInt8](encoder.encode(state)), to: path)
        } catch {
            logger.error("state: cannot save: \(error)")
        }
    }

    private static func reason(_ error: any Error) -> String {
        if let error = error as? DecodingError {
            switch error {
            case .dataCorrupted(let context), .keyNotFound(_, let context), .typeMismatch(_, let context),
                .valueNotFound(_, let context):
                let path = context.codingPath.map(\.stringValue).joined(separator: ".")
                return path.isEmpty ? context.debugDescription : "\(path): \(context.debugDescription)"
            @unknown default:
                return "\(error)"
            }
        }
        return "\(error)"
    }
}
