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

    /// The largest state file read at start; a larger one is refused, never half read nor taken whole into memory.
    static let maximumFileSize = 256 << 20

    let directory: StateDirectory
    var path: String { directory.directory.pathOf(StateDirectory.stateFileName) }
    let logger: Logger
    /// The state read at start, until ``load()`` takes it.
    private let loaded: Mutex<PersistedState?>
    /// The newest state not yet written by the writer thread, with its generation.
    private let pending = Mutex<(state: PersistedState, generation: UInt64)?>(nil)
    /// The size of the last file written, and the bytes written in all.
    private let written = Mutex((last: 0, total: 0))
    /// Held while writing, so that a synchronous write and the writer thread never interleave.
    private let writing = Mutex(())
    private let wakeup: BlockingSignal
    /// The generation of the newest state handed over, and of the newest written (``writtenGeneration``).
    private let generations = Mutex((handed: UInt64(0), written: UInt64(0)))
    /// Called on the writer's thread after each write (the broker's wake-up), for what waits for a state on disk.
    private let afterWrite = Mutex<(@Sendable () -> Void)?>(nil)

    /// Opens and checks the state directory (``StateDirectory``), reads the state file, and starts the writer
    /// thread.
    ///
    /// - Throws: when the directory cannot be trusted or written, or the state file cannot be read: not a regular
    ///   file (a link, a FIFO...), larger than ``maximumFileSize``, or a read error. accmond then refuses to start
    ///   rather than start numbering again. A file that reads but does not decode is moved aside (logged).
    init(directory path: String, logger: Logger) throws {
        self.logger = logger
        directory = try StateDirectory.open(path, logger: logger)
        loaded = Mutex(try Self.read(from: directory.directory, logger: logger))
        wakeup = try BlockingSignal()
        try startThread(name: "accmond-state") { [self] in writeLoop() }
    }

    /// The state read at start; `nil` for a fresh start (no file, or one moved aside as unreadable).
    func load() -> PersistedState? {
        loaded.withLock { state in
            defer { state = nil }
            return state
        }
    }

    private static func read(from directory: DirectoryDescriptor, logger: Logger) throws -> PersistedState? {
        let name = StateDirectory.stateFileName
        let read: [UInt8]?
        do throws(FileError) {
            read = try AtomicFile.read(name, in: directory, limit: maximumFileSize)
        } catch {
            throw DaemonError(
                description: "\(error) (accmond does not start without its state: move it aside to start fresh, "
                    + "numbering from 1 again, or choose another --state-dir)")
        }
        guard let bytes = read else { return nil }
        do {
            let state = try JSONDecoder().decode(PersistedState.self, from: Data(bytes))
            guard state.version == 1 else {
                throw DaemonError(description: "unknown state format version \(state.version)")
            }
            return state
        } catch {
            // try?: the message says so.
            let aside = (try? AtomicFile.moveAside(name, in: directory)) ?? "(could not move it aside)"
            logger.error(
                .state,
                "state: '\(directory.pathOf(name))': unreadable (\(Self.reason(error))); moved to '\(aside)', "
                    + "starting fresh")
            return nil
        }
    }

    /// Hands `state` to the writer thread; a newer state replaces one not yet written. Returns its generation:
    /// once ``writtenGeneration`` reaches it, that state (or a newer one) is on disk.
    @discardableResult
    func save(_ state: PersistedState) -> UInt64 {
        let generation = generations.withLock { generations in
            generations.handed += 1
            return generations.handed
        }
        pending.withLock { $0 = (state, generation) }
        wakeup.signal()
        return generation
    }

    /// Writes `state` now and returns once it is on disk.
    func saveNow(_ state: PersistedState) {
        let generation = generations.withLock { generations in
            generations.handed += 1
            return generations.handed
        }
        writing.withLock { _ in
            pending.withLock { $0 = nil }  // older than this one
            write(state, generation: generation)
        }
    }

    /// The generation of the newest state on disk (see ``save(_:)``).
    var writtenGeneration: UInt64 { generations.withLock { $0.written } }

    /// Has `action` called on the writer's thread after every write from now on.
    func callAfterEachWrite(_ action: @escaping @Sendable () -> Void) {
        afterWrite.withLock { $0 = action }
    }

    private func writeLoop() {
        while true {
            wakeup.wait()
            // Encoded under the lock too: a synchronous write that comes meanwhile waits, and stays the newest.
            writing.withLock { _ in
                if let next = pending.withLock({ state in
                    defer { state = nil }; return state
                }) {
                    write(next.state, generation: next.generation)
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

    private func write(_ state: PersistedState, generation: UInt64) {
        do {
            let bytes = try state.json()
            try AtomicFile.write(bytes, to: StateDirectory.stateFileName, in: directory.directory)
            written.withLock { $0 = (bytes.count, $0.total + bytes.count) }
        } catch {
            logger.error(.state, "state: cannot save: \(error)")
        }
        // A failed write still answers: what waited is told as soon as the disk has had its chance (it was logged).
        generations.withLock { $0.written = max($0.written, generation) }
        afterWrite.withLock { $0 }?()
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
