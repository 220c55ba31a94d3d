import AccmonSys
import Glibc

/// What a following session keeps besides the state: the intervals between end markers, and the hosts to read again.
///
/// A change the broker drops is found two ways. A host's status counts its accessory topics and is published after
/// the changes it counts: a status whose count differs from the accessories shown has the host read again. And since
/// the broker drops a message only while it holds as many for this client as its queue, all of which arrive before
/// the next end marker, the reader keeps an end marker going after changes: when two consecutive intervals between
/// markers hold fewer packets than the queue (and no marker was dropped), nothing was dropped; otherwise the statuses
/// of every host shown are read again and compared (a dropped status is what the first way cannot see), at most
/// every 10 s.
///
/// A host's online status is a lease its bridge renews every half of it. When one runs out without a renewal, the
/// host's status is read again first (the broker may have dropped the renewal for this reader, as mosquitto drops
/// messages for a reader that falls behind): a renewed status carries the lease on; none (the broker expired it)
/// shows the host stale.
struct Watching {
    /// Packets since the last end marker came back, and in the interval before.
    var sinceMarker = 0
    var previousInterval = 0
    var lastPacket: UInt64 = 0
    /// Whether the broker may have dropped a change since the counts were last compared.
    var dropSuspected = false
    var lastStatusCheck: UInt64 = 0
    /// Hosts whose statuses are to be read again and compared.
    var statusChecks: [String] = []
    /// Hosts whose lease ran out, whose status is being read again.
    var leaseChecks: Set<String> = []
    /// Hosts whose count differs from what is shown, to read again, and when each was last read.
    var recheckDue: [String: UInt64] = [:]
    var lastRecheck: [String: UInt64] = [:]
    /// Hosts the broker cannot deliver whole (more topics than its queue), with the count their status said then:
    /// read again only once it says another.
    var givenUp: [String: Int?] = [:]

    /// At most one comparison of every host's count in this time.
    static let statusCheckInterval: UInt64 = 10_000_000_000
    /// After changes, an end marker once none came for this long (or once a quarter of the queue came).
    static let markerAfterChanges: UInt64 = 50_000_000
}

extension FleetSession {
    /// Reads, hands over the state, then follows changes and reconnects; returns only when the first read fails.
    func follow(_ update: @Sendable (FleetUpdate) -> Void) -> MQTTError {
        do {
            try synchronize()
        } catch {
            return error
        }
        update(.state(state))
        var delay = 0.1
        while true {
            for warning in warnings { update(.warning(warning)) }
            warnings = []
            do {
                try run { !changes.isEmpty || !warnings.isEmpty }
                if !changes.isEmpty { update(.changes(changes)) }
                changes = []
                continue
            } catch {
                if connected, rotation.addresses.count > 1 {
                    // Lost: another node or listener of the broker at once (docs/MQTT.md §2).
                    rotation.advance()
                    update(.connection("accmon: \(error.message); reconnecting through \(rotation.current)"))
                } else {
                    update(.connection("accmon: \(error.message); reconnecting in \(delay) s"))
                    usleep(useconds_t(delay * 1e6))
                    delay = min(delay * 2, 10)
                }
            }
            let shown = state
            do {
                try synchronize()
                delay = 0.1
                update(.connection("accmon: connected to \(settings.address)"))
                update(.changes(shown.changes(to: state)))
            } catch {
                state = shown
            }
        }
    }

    /// A message on a fleet topic: to the window reading its host, else to what is shown. `expiry`: a status's
    /// message expiry, what is left of its lease.
    func message(_ topic: FleetTopics.Topic, payload: [UInt8], expiry: UInt32? = nil) {
        let level = topic.hostLevel
        if ahead?.levels.contains(level) == true, topic.isHostTopic {
            ahead!.apply(topic, payload: payload, expiry: expiry, at: packetTime)
            return
        }
        if window != nil {
            switch window!.kind {
            case .index:
                if case .indexEntry = topic {
                    window!.entriesRead += 1
                    if options.selection.includes(hostLevel: level) { window!.entries.insert(level) }
                    return
                }
            case .hosts:
                if window!.levels.contains(level) {
                    window!.apply(topic, payload: payload, expiry: expiry, at: packetTime)
                    return
                }
            case .statusCheck:
                if case .status = topic, window!.levels.contains(level) {
                    _ = window!.fresh.apply(topic, payload: payload, reporting: false, expiry: expiry, at: packetTime)
                    return
                }
            case .claimCheck:
                if case .claim = topic, window!.levels.contains(level) {
                    _ = window!.fresh.apply(topic, payload: payload, reporting: false)
                    return
                }
            case .statuses, .live:
                break
            }
        }
        if case .indexEntry = topic { return }
        guard options.selection.includes(hostLevel: level) else { return }
        if decoding != nil, laterMessage(topic, payload: payload) { return }
        let shown = state.apply(
            topic, payload: payload, reporting: phase == .following, expiry: expiry, at: packetTime)
        if phase == .following { changes += shown }
        guard case .status = topic, let host = state.hosts[level], host.status != nil else { return }
        if !listed.contains(level), phase == .hosts || phase == .following {
            // A host that appeared meanwhile: read it whole.
            listed.insert(level)
            plan.add(level: level, expected: host.status?.retainedCount(.accessories))
        } else if phase == .following, let counted = host.status?.retainedCount(.accessories),
            counted != host.accessories.count, watching.givenUp[level] != .some(counted)
        {
            scheduleRecheck(level)
        }
    }

    /// Closes the interval a window's end marker ends; while following, notes whether the broker may have dropped a
    /// change in it.
    func closeInterval(markerDropped: Bool) {
        defer {
            watching.previousInterval = watching.sinceMarker
            watching.sinceMarker = 0
        }
        guard follows, phase == .hosts || phase == .following else { return }
        let packets = watching.previousInterval + watching.sinceMarker + Self.uncountedPackets
        if markerDropped || packets >= brokerQueue { watching.dropSuspected = true }
    }

    /// While following, with no window open: starts what is due (hosts to read again, the comparison of every count
    /// after a possible drop, an end marker after changes); returns when something is next due, or `nil` once a
    /// window started.
    func startFollowingRead(now: UInt64) throws(MQTTError) -> UInt64? {
        let runOut = state.leasesRunOut(now: now).filter { !watching.leaseChecks.contains($0) }
        if !runOut.isEmpty {
            watching.leaseChecks.formUnion(runOut)
            watching.statusChecks = runOut + watching.statusChecks.filter { !runOut.contains($0) }
        }
        for (level, due) in watching.recheckDue where due <= now {
            watching.recheckDue[level] = nil
            watching.lastRecheck[level] = now
            plan.add(level: level, expected: state.hosts[level]?.status?.retainedCount(.accessories))
        }
        let checkDue = watching.lastStatusCheck + Watching.statusCheckInterval
        if watching.dropSuspected, now >= checkDue || watching.lastStatusCheck == 0 {
            watching.dropSuspected = false
            watching.lastStatusCheck = now
            watching.statusChecks = listed.sorted()
            // A dropped claim topic changes no count: the claims are read again too.
            claimChecks += watching.statusChecks
        }
        if !watching.statusChecks.isEmpty {
            let levels = Array(watching.statusChecks.prefix(max(1, budget)))
            watching.statusChecks.removeFirst(levels.count)
            // Subscribed again, a status topic comes again (a host's kept subscription stays as it was).
            let keep: Bool
            if case .all = options.selection { keep = false } else { keep = true }
            try startWindow(.statusCheck(levels), filters: levels.map { topics.status(hostLevel: $0) }, keep: keep)
            return nil
        }
        if !plan.isEmpty {
            try startHostWindow(plan.nextWindow())
            return nil
        }
        if try startClaimCheck() { return nil }
        let quiet = now - min(watching.lastPacket, now)
        if watching.sinceMarker > 0, quiet >= Watching.markerAfterChanges || watching.sinceMarker >= brokerQueue / 4 {
            try startWindow(.live, filters: [], keep: true)
            return nil
        }
        var next = now + 1_000_000_000
        if let due = watching.recheckDue.values.min() { next = min(next, due) }
        if let leaseEnd = state.nextLeaseEnd { next = min(next, leaseEnd) }
        if watching.sinceMarker > 0 { next = min(next, watching.lastPacket + Watching.markerAfterChanges) }
        if watching.dropSuspected { next = min(next, checkDue) }
        return next
    }

    /// The end of a comparison of counts, or of a lease that ran out: a host whose status counts other than what is
    /// shown, or counts nothing, is read again; a status changed meanwhile is shown, with its lease; a host whose lease
    /// ran out and whose status the broker no longer has is shown stale, as it was.
    func finishStatusCheck(_ levels: [String], fresh: FleetState) {
        for level in levels {
            let read = fresh.hosts[level]
            if watching.leaseChecks.remove(level) != nil, read?.status == nil {
                changes += state.markStale(level: level)
                continue
            }
            if let read, read.status != nil { changes += state.takeStatus(level: level, from: read) }
            // A stale host's status expired: nothing to read again until a bridge speaks for it.
            if state.hosts[level]?.stale == true { continue }
            let status = read?.status
            let counted = status?.retainedCount(.accessories)
            if let given = watching.givenUp[level], given == counted { continue }
            if counted == nil || counted != state.hosts[level]?.accessories.count {
                plan.add(level: level, expected: counted)
            }
        }
    }

    /// Reads a host again soon: its status counts other than what is shown, so a change was missed (or its count is
    /// wrong: then at most every 2 s).
    func scheduleRecheck(_ level: String) {
        guard watching.recheckDue[level] == nil else { return }
        let now = monotonicNanoseconds()
        watching.recheckDue[level] = max(now + 300_000_000, (watching.lastRecheck[level] ?? 0) + 2_000_000_000)
    }
}
