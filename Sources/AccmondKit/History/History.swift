import AccmonLogging
import AccmonManifest
import AccmonProtocol
import AccmonSys

/// What happened to the accessories, newest last: a ring of at most ``capacity`` entries, kept on the loop's thread,
/// written to `history.jsonl` in the state directory by a thread of its own (``HistoryWriter``) and read back at
/// start.
///
/// Recording costs the event path a record (one allocation: the accessory is a retain of its copy-on-write box),
/// the wall clock, a slot of the ring, and the hand-over to the writer (a lock and an append): no encoding, no
/// system call but the writer's wake-up, at most once per write interval.
final class History {
    /// The most entries kept; 0 keeps none (the history is off).
    let capacity: Int
    private var ring: BoundedRing<HistoryRecord>
    /// The number of the last entry recorded (or of the last reserved before a crash).
    private(set) var lastSeq: UInt64 = 0
    private let writer: HistoryWriter?
    private let logger: Logger

    /// A history of at most `capacity` entries, read from `directory` (and written there) when one is given.
    ///
    /// - Throws: when the writer thread cannot start.
    init(capacity: Int, directory: DirectoryDescriptor?, logger: Logger) throws {
        self.capacity = max(0, capacity)
        self.logger = logger
        ring = BoundedRing(capacity: self.capacity)
        guard self.capacity > 0, let directory else {
            writer = nil
            return
        }
        let loaded = HistoryFile.load(from: directory, capacity: self.capacity, logger: logger)
        ring.append(contentsOf: loaded.records)
        lastSeq = loaded.lastSeq
        do throws(Errno) {
            writer = try HistoryWriter(
                directory: directory, capacity: self.capacity, records: loaded.records, lastSeq: lastSeq,
                logger: logger)
        } catch {
            throw DaemonError(description: "accmond: history writer thread: \(error)")
        }
        if !loaded.records.isEmpty {
            logger.info(.state, "history restored: \(loaded.records.count) entries", ["seq": String(lastSeq)])
        }
    }

    /// The entries kept now.
    var count: Int { ring.count }

    /// Records an entry about `accessory`, visible to whoever may see it under `verdict` now (names counting through
    /// `accounts`, the manifest's); `rejected` entries, and entries of a rejected accessory, to admins only.
    ///
    /// - Parameters:
    ///   - kind: what happened.
    ///   - accessory: the accessory as clients see it (``Authentication/announced(_:)``).
    ///   - verdict: the accessory's verdict now.
    ///   - accounts: the ids the manifest's names resolve to now (``Authorizer/accounts``).
    ///   - eventSeq: the event's `seq`, for connect, disconnect and rejected.
    ///   - actor: who acted (the claimer, the admin who broke a claim).
    ///   - holder: the claim's holder.
    ///   - reason: a claim's or a break's reason, or a rejection's.
    ///   - accessoryObject: `accessory`'s object as ``EventLineWriter`` wrote it already (in the event's line), for
    ///     the writer to copy.
    func record(
        _ kind: HistoryEntry.Kind, accessory: Accessory, verdict: Authentication, accounts: AccountIDs,
        eventSeq: UInt64? = nil, actor: Party? = nil, holder: Party? = nil, reason: String? = nil,
        accessoryObject: ArraySlice<UInt8>? = nil
    ) {
        guard capacity > 0 else { return }
        lastSeq += 1
        let record = HistoryRecord(
            entry: HistoryEntry(
                seq: lastSeq, time: wallClockSeconds(), kind: kind, accessory: accessory, eventSeq: eventSeq,
                actor: actor, holder: holder, reason: reason),
            verdict: verdict, accounts: accounts)
        ring.append(record)
        writer?.take(record, accessoryObject: accessoryObject)
    }

    /// The newest `query.limit` entries recorded after `query.since`, numbered below `query.before`, whose accessory
    /// passes `query.filter` and that `principal` may see (``HistoryRecord/isVisible(to:isAdmin:)``), oldest first;
    /// `truncated` when more would pass but would take the entries past `byteBudget` bytes on the wire (the first
    /// entry is always given). The budget keeps one reply, which the daemon queues whatever the client's buffer
    /// holds (PROTOCOL.md §10), to about the client buffer's bound, and the loop's work on it as small.
    func entries(
        matching query: HistoryQuery, for principal: ClientPrincipal?, isAdmin: Bool, byteBudget: Int
    ) -> (entries: [HistoryEntry], truncated: Bool) {
        var found: [HistoryEntry] = []
        var truncated = false
        var measure = JSONOutput(capacity: 1024)
        ring.forEachNewestFirst { record in
            if let since = query.since, !(record.entry.time > since) { return true }
            if let before = query.before, record.entry.seq >= before { return true }
            guard record.isVisible(to: principal, isAdmin: isAdmin), query.filter.matches(record.entry.accessory)
            else { return true }
            HistoryLineWriter.entry(record.entry, into: &measure)
            if measure.count + found.count > byteBudget, !found.isEmpty {  // a comma between entries
                truncated = true
                return false
            }
            found.append(record.entry)
            return found.count < query.limit
        }
        return (found.reversed(), truncated)
    }

    /// At shutdown, after the last entry: writes what waits and reserves exactly the last number, waiting for the
    /// disk at most ``HistoryWriter/finishTimeoutMilliseconds``.
    func finish() {
        guard let writer else { return }
        if !writer.finish(lastSeq: lastSeq) {
            logger.warning(
                .state,
                "history: the disk did not take the last entries within "
                    + "\(HistoryWriter.finishTimeoutMilliseconds / 1000) s; they may be lost (the next numbers stay "
                    + "higher)")
        }
    }
}

extension BrokerState {
    /// Records a history entry about a connected `accessory` (as the registry holds it): it is announced, and seen,
    /// as its verdict says now (``Authorizer/verdict(_:)``); an accessory without one (not connected) is seen by
    /// admins only. The claims code records `claim`, `release`, `contention` and `break` through this.
    func recordHistory(
        _ kind: HistoryEntry.Kind, _ accessory: Accessory, actor: Party? = nil, holder: Party? = nil,
        reason: String? = nil
    ) {
        let verdict = authorizer.verdict(accessory.connectionID) ?? .rejected(reason: "")
        history.record(
            kind, accessory: verdict.announced(accessory), verdict: verdict, accounts: authorizer.accounts,
            actor: actor, holder: holder, reason: reason)
    }
}
