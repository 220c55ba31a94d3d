import AccmonLogging
import AccmonProtocol
import AccmonSys
import Synchronization

/// Writes the history file on a thread of its own, `accmond-history`, so that the broker loop never waits on the
/// disk: the loop hands each new record over (``take(_:)``: a lock and an append), the thread encodes and appends
/// them at most every ``writeIntervalMilliseconds``, and fsyncs each write.
///
/// - **Bounded while the disk stalls or fails.** Records handed over but not yet written wait in a ring of the
///   history's capacity: past it the oldest are dropped (the loop's ring has evicted them too), so a disk that never
///   answers costs at most one more ring of references. The thread keeps its own copy of the newest entries (the
///   same records, shared), from which it rewrites the whole file by atomic replacement after a failed write (every
///   second until one succeeds), and when the file holds twice the ring.
/// - **Numbers kept across a crash.** Each write reserves numbers ahead (``reservation``): after a crash the next
///   run starts after the reservation, never reusing a number given out but not yet written, unless the disk stalled
///   for more than half a reservation of entries. A clean stop writes everything and reserves exactly the last
///   number.
final class HistoryWriter: Sendable {
    /// How long new records wait, at most, before they are written: what a crash (`kill -9`) may lose.
    static let writeIntervalMilliseconds: Int32 = 100
    /// How many numbers one reservation covers.
    static let reservation: UInt64 = 100_000
    /// How long the stop waits for the last write.
    static let finishTimeoutMilliseconds: Int32 = 5_000

    /// A record handed over, with its accessory object's bytes when the loop wrote them already (in the event's
    /// line): the thread copies them instead of writing the object again, and drops them once written.
    struct Handed: Sendable {
        var record: HistoryRecord
        var accessoryObject: ArraySlice<UInt8>?
    }

    private struct Pending {
        var records: BoundedRing<Handed>
        /// Set by ``finish(lastSeq:)``: write everything, reserve exactly this number, and end.
        var finishAt: UInt64?
    }

    private let pending: Mutex<Pending>
    private let wakeup: BlockingSignal
    private let finished: BlockingSignal

    /// Rewrites the file in `directory` with `records` (the history loaded at start) and a reservation after
    /// `lastSeq`, then starts the writer thread. A failed first write is logged and retried by the thread.
    init(
        directory: DirectoryDescriptor, capacity: Int, records: [HistoryRecord], lastSeq: UInt64, logger: Logger
    )
        throws(Errno)
    {
        pending = Mutex(Pending(records: BoundedRing(capacity: capacity)))
        wakeup = try BlockingSignal()
        finished = try BlockingSignal()
        var file = FileState(directory: directory, capacity: capacity, logger: logger)
        file.written.append(contentsOf: records)
        file.rewrite(reserving: lastSeq + Self.reservation)
        try startThread(name: "accmond-history") { [self, file] in
            var file = file
            run(&file)
        }
    }

    /// Hands a new record to the thread. Called by the loop: a lock, an append, and a wake-up when the queue was
    /// empty (at most once per write interval).
    func take(_ record: HistoryRecord, accessoryObject: ArraySlice<UInt8>?) {
        let wasEmpty = pending.withLock { pending in
            defer { pending.records.append(Handed(record: record, accessoryObject: accessoryObject)) }
            return pending.records.isEmpty
        }
        if wasEmpty { wakeup.signal() }
    }

    /// Asks the thread to write what waits and reserve exactly `lastSeq`, and waits for it at most
    /// ``finishTimeoutMilliseconds``; returns whether it was written in time.
    func finish(lastSeq: UInt64) -> Bool {
        pending.withLock { $0.finishAt = lastSeq }
        wakeup.signal()
        return finished.wait(timeoutMilliseconds: Self.finishTimeoutMilliseconds)
    }

    private func run(_ file: inout FileState) {
        while true {
            // A failed write is retried every second, whether or not new records come.
            if file.needsRewrite {
                _ = wakeup.wait(timeoutMilliseconds: 1_000)
            } else {
                wakeup.wait()
            }
            // Records that come within the interval go in the same write.
            let deadline = monotonicNanoseconds() + UInt64(Self.writeIntervalMilliseconds) * 1_000_000
            while pending.withLock({ $0.finishAt == nil }) {
                let now = monotonicNanoseconds()
                guard now < deadline else { break }
                _ = wakeup.wait(timeoutMilliseconds: Int32((deadline - now) / 1_000_000) + 1)
            }
            let (batch, finishAt) = pending.withLock { pending in
                defer { pending.records = pending.records.emptied }
                return (pending.records, pending.finishAt)
            }
            file.write(batch, finishingAt: finishAt)
            if finishAt != nil {
                finished.signal()
                return
            }
        }
    }
}

/// What the writer thread alone touches: the file, the copy of the newest entries it holds, the reservation.
private struct FileState: Sendable {
    let directory: DirectoryDescriptor
    let logger: Logger
    /// The newest entries handed over, the file's content once written.
    var written: BoundedRing<HistoryRecord>
    /// The file open for appending; `nil` until a rewrite succeeds.
    var file: FileDescriptor?
    var linesInFile = 0
    var bytesInFile = 0
    /// The last reservation written.
    var reserved: UInt64 = 0
    /// The newest number handed over.
    var lastSeq: UInt64 = 0
    /// Whether the file must be rewritten whole: a write failed (it may have left part of a line).
    var needsRewrite = true
    /// Failed writes not yet logged, and when the last failure line was logged.
    var failuresUnlogged = 0
    var lastFailureLogged: UInt64 = 0
    /// Records dropped while the disk did not take them, not yet logged.
    var droppedUnlogged = 0

    init(directory: DirectoryDescriptor, capacity: Int, logger: Logger) {
        self.directory = directory
        self.logger = logger
        written = BoundedRing(capacity: capacity)
    }

    var maximumBytes: Int { HistoryFile.maximumSize(capacity: written.capacity) / 2 }

    /// Writes a batch: appended, or the whole file rewritten when a write failed before or the file is due for
    /// compaction. A finishing write reserves exactly `finishingAt`.
    mutating func write(_ batch: BoundedRing<HistoryWriter.Handed>, finishingAt: UInt64?) {
        droppedUnlogged += batch.evicted
        for index in 0..<batch.count { written.append(batch[index].record) }
        lastSeq = max(lastSeq, batch.last?.record.entry.seq ?? 0)
        let reservation: UInt64? =
            if let finishingAt {
                finishingAt
            } else if lastSeq + HistoryWriter.reservation / 2 > reserved {
                lastSeq + HistoryWriter.reservation
            } else {
                nil
            }
        if needsRewrite || linesInFile + batch.count > 2 * written.capacity || bytesInFile > maximumBytes {
            rewrite(reserving: reservation ?? reserved)
        } else if !batch.isEmpty || reservation != nil {
            append(batch, reserving: reservation)
        }
    }

    private mutating func append(_ batch: BoundedRing<HistoryWriter.Handed>, reserving reservation: UInt64?) {
        guard let file else { return rewrite(reserving: reservation ?? reserved) }
        var out = JSONOutput(capacity: 64 + 800 * batch.count)
        for index in 0..<batch.count {
            HistoryFile.line(batch[index].record, accessoryObject: batch[index].accessoryObject, into: &out)
        }
        if let reservation { HistoryFile.reservation(reservation, into: &out) }
        let bytes = out.bytes()
        do throws(Errno) {
            try file.writeAll(bytes)
            try file.synchronize()
        } catch {
            failed("append to '\(directory.pathOf(HistoryFile.name))': \(error)")
            return
        }
        linesInFile += batch.count + (reservation == nil ? 0 : 1)
        bytesInFile += bytes.count
        if let reservation { reserved = reservation }
        succeeded()
    }

    /// Replaces the file with the entries held and `reservation`, by atomic replacement, and opens it for appending.
    mutating func rewrite(reserving reservation: UInt64) {
        file?.close()
        file = nil
        let records = written.elements
        var byteCount = 0
        let chunks = HistoryFile.chunks(records, reserved: reservation).lazy.map { chunk in
            byteCount += chunk.count
            return chunk
        }
        do throws(FileError) {
            try AtomicFile.write(chunks: chunks, to: HistoryFile.name, in: directory)
        } catch {
            failed("\(error)")
            return
        }
        do throws(Errno) {
            let opened = try directory.openForAppending(HistoryFile.name)
            guard (try? opened.status().kind) == .regular else {  // try?: an fstat that fails is no regular file
                opened.close()
                failed("'\(directory.pathOf(HistoryFile.name))': not a regular file after it was written")
                return
            }
            file = opened
        } catch {
            failed("open '\(directory.pathOf(HistoryFile.name))' for appending: \(error)")
            return
        }
        linesInFile = records.count + 2
        bytesInFile = byteCount
        reserved = reservation
        needsRewrite = false
        succeeded()
    }

    private mutating func failed(_ reason: String) {
        file?.close()
        file = nil
        needsRewrite = true
        failuresUnlogged += 1
        let now = monotonicNanoseconds()
        guard lastFailureLogged == 0 || now &- lastFailureLogged >= 60_000_000_000 else { return }
        logger.error(
            .state,
            "history: cannot write: \(reason); events go on, the newest \(written.capacity) entries are kept in "
                + "memory and written when the disk takes them, retried every second"
                + (failuresUnlogged > 1 ? " (\(failuresUnlogged) failures since the last such line)" : ""))
        failuresUnlogged = 0
        lastFailureLogged = now
    }

    private mutating func succeeded() {
        if lastFailureLogged != 0 || droppedUnlogged > 0 {
            logger.notice(
                .state,
                "history: written again"
                    + (droppedUnlogged > 0
                        ? "; \(droppedUnlogged) older entries were dropped meanwhile (past the \(written.capacity) kept)"
                        : ""))
            lastFailureLogged = 0
            failuresUnlogged = 0
            droppedUnlogged = 0
        }
    }
}
