import AccmonDevices
import AccmonLogging
import AccmonManifest
import AccmonProtocol
import AccmonSys
import FoundationEssentials
import Synchronization

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
    }

    struct ReplayedEvent: Codable, Sendable, Equatable {
        var change: AccessoryEvent.Change
        var seq: UInt64
        var accessory: Accessory
    }
}

extension PersistedState {
    /// The state as JSON, written directly as ``EventLineWriter`` writes event lines: JSONEncoder took some 100,000
    /// instructions per accessory, and the state holds every connected accessory and each preserved session's known
    /// accessories and replay. The bytes are JSONEncoder's with sorted keys and unescaped slashes; JSONDecoder reads
    /// them back (``StateStore/load()``).
    func json() -> [UInt8] {
        typealias Writer = EventLineWriter
        let accessories = connected.count + sessions.reduce(0) { $0 + $1.known.count + $1.replay.count }
        var out = JSONOutput(capacity: 128 + 512 * accessories)
        Writer.literal(#"{"connected":["#, into: &out)
        Writer.list(connected, into: &out) { entry, out in
            Writer.literal(#"{"accessory":"#, into: &out)
            Writer.accessory(entry.accessory, into: &out)
            Writer.member(#","key":"#, entry.key, into: &out)
            out.append(UInt8(ascii: "}"))
        }
        Writer.literal(#"],"connectionCeiling":"#, into: &out)
        Writer.number(connectionCeiling, into: &out)
        Writer.literal(#","sequenceCeiling":"#, into: &out)
        Writer.number(sequenceCeiling, into: &out)
        Writer.literal(#","sessions":["#, into: &out)
        Writer.list(sessions, into: &out) { session, out in session.write(into: &out) }
        Writer.literal(#"],"version":"#, into: &out)
        out.append(utf8: String(version))
        out.append(UInt8(ascii: "}"))
        return out.bytes()
    }
}

extension PersistedState.PreservedEntry {
    fileprivate func write(into out: inout JSONOutput) {
        typealias Writer = EventLineWriter
        Writer.literal(#"{"acknowledged":"#, into: &out)
        Writer.number(acknowledged, into: &out)
        Writer.member(#","clientName":"#, clientName, into: &out)
        Writer.literal(#","filter":{"#, into: &out)
        // The filter's keys, sorted; an absent one is left out, as JSONEncoder leaves out a nil optional.
        let fields = [
            ("kind", filter.kind?.rawValue), ("productID", filter.productID),
            ("protocol", filter.protocolString), ("vendorID", filter.vendorID),
        ].compactMap { key, value in value.map { (key, $0) } }
        Writer.list(fields, into: &out) { field, out in
            Writer.string(field.0, into: &out)
            out.append(UInt8(ascii: ":"))
            Writer.string(field.1, into: &out)
        }
        Writer.literal(#"},"gids":["#, into: &out)
        Writer.list(gids, into: &out) { gid, out in Writer.number(UInt64(gid), into: &out) }
        Writer.literal(#"],"known":["#, into: &out)
        Writer.list(known, into: &out) { accessory, out in Writer.accessory(accessory, into: &out) }
        Writer.literal(#"],"preservedAt":"#, into: &out)
        // As JSONEncoder writes a Double: a whole number without a fraction. Wall-clock seconds are finite; JSON has
        // no form for infinity or NaN (such a session would expire at once).
        let seconds = preservedAt.isFinite ? preservedAt : 0
        if seconds == seconds.rounded(), abs(seconds) < 0x1p53 {
            out.append(utf8: String(Int64(seconds)))
        } else {
            out.append(utf8: seconds.description)
        }
        Writer.literal(#","replay":["#, into: &out)
        Writer.list(replay, into: &out) { event, out in
            Writer.literal(#"{"accessory":"#, into: &out)
            Writer.accessory(event.accessory, into: &out)
            Writer.member(#","change":"#, event.change.rawValue, into: &out)
            Writer.literal(#","seq":"#, into: &out)
            Writer.number(event.seq, into: &out)
            out.append(UInt8(ascii: "}"))
        }
        Writer.member(#"],"restoreID":"#, restoreID, into: &out)
        Writer.literal(#","uid":"#, into: &out)
        Writer.number(UInt64(uid), into: &out)
        out.append(UInt8(ascii: "}"))
    }
}

/// Reads and writes the daemon's state file with atomic replacement.
///
/// The broker writes at most every ``StateStore/writeIntervalNanoseconds`` (a crash loses at most that much of
/// acknowledgements and session changes; the connected set is re-learnt from the enumeration at start), and at
/// once before sequence numbers or connection ids pass the reserved ceiling, so they keep increasing across
/// restarts whatever the crash point. Routine writes happen on a writer thread of the store's own, which also encodes
/// the state (its size grows with the connected set and the preserved sessions), so that neither encoding nor fsync
/// holds up the broker loop; only the reservation and shutdown writes wait, for both.
final class StateStore: Sendable {
    /// The most time between a change and its write.
    static let writeIntervalNanoseconds: UInt64 = 100_000_000
    /// How many sequence numbers and connection ids are reserved by one write.
    static let reservation: UInt64 = 100_000

    let path: String
    let logger: Logger
    /// The newest state not yet written by the writer thread.
    private let pending = Mutex<PersistedState?>(nil)
    /// Held while writing, so that a synchronous write and the writer thread never interleave.
    private let writing = Mutex(())
    private let wakeup: BlockingSignal

    init(directory: String, logger: Logger) throws {
        path = directory + "/state.json"
        self.logger = logger
        wakeup = try BlockingSignal()
        try startThread(name: "accmond-state") { [self] in writeLoop() }
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

    /// Hands `state` to the writer thread; a newer state replaces one not yet written.
    func save(_ state: PersistedState) {
        pending.withLock { $0 = state }
        wakeup.signal()
    }

    /// Writes `state` now and returns once it is on disk.
    func saveNow(_ state: PersistedState) {
        writing.withLock { _ in
            pending.withLock { $0 = nil }  // older than this one
            write(state.json())
        }
    }

    private func writeLoop() {
        while true {
            wakeup.wait()
            // Encoded under the lock too: a synchronous write that comes meanwhile waits, and stays the newest.
            writing.withLock { _ in
                if let state = pending.withLock({ state in
                    defer { state = nil }; return state
                }) {
                    write(state.json())
                }
            }
        }
    }

    private func write(_ bytes: [UInt8]) {
        do {
            try AtomicFile.write(bytes, to: path)
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
