import AccmonDevices
import AccmonLogging
import AccmonManifest
import AccmonProtocol
import AccmonSys
import FoundationEssentials
import Synchronization

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
    /// The most bytes written per second on average: a large state (many preserved sessions) is written less often.
    static let writeBytesPerSecond: Double = 4 * 1024 * 1024
    /// How many sequence numbers and connection ids are reserved by one write.
    static let reservation: UInt64 = 100_000

    let path: String
    let logger: Logger
    /// The newest state not yet written by the writer thread.
    private let pending = Mutex<PersistedState?>(nil)
    /// The size of the last file written, and the bytes written in all.
    private let written = Mutex((last: 0, total: 0))
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
            logger.error(.state, "state: \(error); starting fresh")
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
            logger.error(
                .state, "state: '\(path)': unreadable (\(Self.reason(error))); moved to '\(aside)', starting fresh")
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
            write(state)
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
                    write(state)
                }
            }
        }
    }

    /// The size of the last state file written, and the bytes written since the start.
    var bytesWritten: (last: Int, total: Int) { written.withLock { $0 } }

    /// How long after a write the next routine one may come: ``writeIntervalNanoseconds``, or longer for a large
    /// file, so that writes average at most ``writeBytesPerSecond``.
    var nanosecondsBetweenWrites: UInt64 {
        let last = written.withLock { $0.last }
        return max(Self.writeIntervalNanoseconds, UInt64(Double(last) / Self.writeBytesPerSecond * 1e9))
    }

    private func write(_ state: PersistedState) {
        do {
            let bytes = try state.json()
            try AtomicFile.write(bytes, to: path)
            written.withLock { $0 = (bytes.count, $0.total + bytes.count) }
        } catch {
            logger.error(.state, "state: cannot save: \(error)")
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
