import AccmonSys

/// The reads of a session: the host list, then the hosts in windows; how a window starts and ends.
extension FleetSession {
    /// A fresh connection and a full read: the hosts to read (every status, the host index when the statuses are
    /// more than one read delivers, or just the host named), then the hosts in windows.
    func synchronize() throws(MQTTError) {
        state = FleetState(topics: topics)
        listed = []
        indexed = []
        changes = []
        incomplete = false
        decoding = follows ? nil : Decoding(decoder: AccessoryDecoder(handOver: eachHost))
        try connect()
        switch options.selection {
        case .named(let name):
            let level = FleetTopics.encodeLevel(name)
            // Its census answer first: its count, where the broker serves no status (a cluster node).
            try sendCensus()
            try settleCensus()
            listed.insert(level)
            plan.add(level: level, expected: censusCount(level: level))
        case .all, .matching:
            try readHostList()
            // The census before any host's window: its answers and a window's retained messages would share the
            // broker's queue for this reader.
            try sendCensus()
            try settleCensus()
        }
        if follows, case .all = options.selection {
            // Every host's changes from now on; each host's window brings what it holds.
            try subscribe([topics.filter(.accessories), topics.allClaims], options: [.noRetained])
        }
        phase = .hosts
        // What came before is of no host yet read (FleetSession+Following.swift, closeInterval).
        watching.previousInterval = 0
        watching.sinceMarker = 0
        repeat {
            while !plan.isEmpty || !claimChecks.isEmpty || window != nil {
                if window == nil, plan.isEmpty {
                    _ = try startClaimCheck()
                } else if window == nil || chainDue {
                    try startHostWindow(plan.nextWindow())
                }
                try run { window == nil || chainDue }
            }
            // The hosts the census found that the retained store did not give: read too.
        } while try takeCensus()
        noteUnansweredNamedHost()
        finishDecoding()
        changes = []
        phase = .following
    }

    /// Whether `list` starts the next window now: the oldest window's SUBACK came, so its messages are coming, and
    /// the next window's will be queued behind them; both fit the broker's queue (``budget``). The broker then
    /// prepares a window while this reader reads the one before. Not while following (the intervals between markers
    /// must not overlap there), nor for a window bigger than the budget.
    private var chainDue: Bool {
        guard !follows, ahead == nil, let window, window.subscribed, window.markerAfter == nil, !plan.isEmpty,
            case .hosts = window.kind
        else { return false }
        return plan.nextWindowFits
    }

    /// Every status in one read, then the host index: the hosts whose status the broker no longer holds (it expired
    /// their lease: their bridge, or the broker between, is gone) are known by their entry, and the index lists the
    /// hosts whose statuses that read may have lost.
    private func readHostList() throws(MQTTError) {
        phase = .statuses
        try startWindow(.statuses, filters: [topics.statuses], keep: follows)
        try run { window == nil }
        var levels = Set(state.hosts.keys)
        if let finished {
            let statusesWhole = finished.complete
            phase = .index
            indexed = try readIndex(hostsAtLeast: finished.window.packets)
            let unindexed = levels.subtracting(indexed)
            levels.formUnion(indexed)
            if !statusesWhole, !unindexed.isEmpty {
                incomplete = true
                warnings.append(
                    "accmon: mqtt: \(settings.address): more hosts than the broker delivers in one read (at least "
                        + "\(finished.window.packets)), and \(unindexed.count) of those read publish no host index "
                        + "entry (bridges older than this accmon, or refused by the broker's ACL): other such hosts "
                        + "may be missing; raise the broker's max_queued_messages above the number of hosts "
                        + "(docs/MQTT.md §5)")
            }
        }
        for level in levels.sorted() {
            listed.insert(level)
            plan.add(level: level, expected: state.hosts[level]?.status?.retainedCount(.accessories))
        }
    }

    /// The hosts of the host index the selection shows, read in windows of buckets.
    private func readIndex(hostsAtLeast: Int) throws(MQTTError) -> Set<String> {
        var index = HostIndexPlan(budget: budget, hostsAtLeast: hostsAtLeast)
        var entries: Set<String> = []
        while !index.isEmpty {
            let buckets = index.nextWindow()
            try startWindow(.index(buckets), filters: buckets.map(topics.indexBucket), keep: false)
            try run { window == nil }
            guard let finished else { continue }
            entries.formUnion(finished.window.entries)
            if !index.finish(buckets, complete: finished.complete, entries: finished.window.entriesRead) {
                incomplete = true
                warnings.append(
                    "accmon: mqtt: \(settings.address): host index bucket \(HostIndex.bucketLevel(buckets[0])): "
                        + "more entries than the broker delivers at once (it queues at most \(brokerQueue) messages "
                        + "for a client): some hosts may be missing; raise its max_queued_messages (docs/MQTT.md §5)")
            }
        }
        return entries
    }

    /// Subscribes a window's filters (after unsubscribing the last windows' that are not kept) and sends its first
    /// end marker.
    func startWindow(_ kind: FleetWindow.Kind, filters: [String], keep: Bool) throws(MQTTError) {
        guard let client else { throw MQTTError(.unreachable, "mqtt: not connected") }
        windowNumber += 1
        var window = FleetWindow(
            kind: kind, filters: filters, keep: keep, number: windowNumber, lastPacket: monotonicNanoseconds(),
            fresh: FleetState(topics: topics))
        var packets = 0
        if !pendingUnsubscribe.isEmpty, !filters.isEmpty {
            try client.unsubscribe(pendingUnsubscribe)
            pendingUnsubscribe = []
            packets += 1  // the UNSUBACK
        }
        switch kind {
        case .hosts(let hosts):
            window.levels = Set(hosts.map(\.level))
            let expected = hosts.reduce(0) { $0 + plan.size(of: $1) }
            packets += expected
            if decoding != nil {
                window.holdsPayloads = true
                window.payloadBytes.reserveCapacity(expected * Decoding.bytesPerPayload)
            }
        case .statusCheck(let levels):
            window.levels = Set(levels)
            packets += levels.count
        case .claimCheck(let levels):
            window.levels = Set(levels)
            packets += levels.reduce(0) { $0 + claimCheckSize($1) }
        case .statuses, .index, .live:
            break
        }
        if !filters.isEmpty {
            window.subscribeID = try client.subscribe(filters)
            packets += 1  // the SUBACK
        }
        if packets + Self.uncountedPackets < brokerQueue {
            try sendMarker(&window)
        } else {
            window.markerAfter = packets
        }
        if self.window == nil { self.window = window } else { ahead = window }
    }

    /// A window of whole hosts: each host's status, accessory and claim topics, subscribed together so that the count
    /// the status carries and the topics read are of one moment. The claims are not counted: a window in which the
    /// broker may have dropped a message has its hosts' claims read again (FleetSession+Claims.swift).
    func startHostWindow(_ hosts: [FleetReadPlan.Host]) throws(MQTTError) {
        var filters: [String] = []
        filters.reserveCapacity(hosts.count * 3)
        for host in hosts {
            filters.append(topics.status(hostLevel: host.level))
            filters.append(topics.filter(.accessories, hostLevel: host.level))
            filters.append(topics.claims(hostLevel: host.level))
        }
        let keep: Bool
        if case .all = options.selection { keep = false } else { keep = follows }
        try startWindow(.hosts(hosts), filters: filters, keep: keep)
    }

    /// Ends the window whose end marker came back: whether it can have lost a message, what its hosts are.
    func finishWindow() {
        guard let window else { return }
        self.window = ahead
        ahead = nil
        let underQueue = window.packets + Self.uncountedPackets < brokerQueue
        let complete = window.endedWith == 0 && underQueue
        if window.endedWith != 0, underQueue { learnSmallerQueue(window.packets) }
        if !window.keep { pendingUnsubscribe += window.filters }
        finished = (window, complete)
        closeInterval(markerDropped: window.endedWith != 0)
        switch window.kind {
        case .hosts(let hosts): finishHosts(hosts, of: window, complete: complete)
        case .statusCheck(let levels): finishStatusCheck(levels, fresh: window.fresh)
        case .claimCheck(let levels): finishClaimCheck(levels, fresh: window.fresh, complete: complete)
        case .statuses, .index, .live: break
        }
    }

    private func finishHosts(_ hosts: [FleetReadPlan.Host], of window: FleetWindow, complete: Bool) {
        let fresh = window.fresh
        let verdicts = plan.finish(hosts, complete: complete) { level in
            (
                window.accessoriesRead(level: level),
                fresh.hosts[level]?.status?.retainedCount(.accessories) ?? censusCount(level: level)
            )
        }
        let now = monotonicNanoseconds()
        for (level, verdict) in verdicts {
            switch verdict {
            case .again:
                continue
            case .done:
                watching.givenUp[level] = nil
            case .givenUp(let received, let expected):
                incomplete = true
                watching.givenUp[level] = expected
                let name = FleetTopics.decodeLevel(level)
                warnings.append(
                    complete
                        ? "accmon: host '\(name)': its status counts \(expected ?? received) accessory topics, "
                            + "\(received) read: the broker delivered no more, with nothing dropped (a cluster node "
                            + "that does not serve every retained message? docs/MQTT.md §11)"
                        : expected.map {
                        "accmon: host '\(name)': \(received) of its \($0) accessory topics read: the broker dropped the "
                            + "others (it queues at most \(brokerQueue) messages for a client); raise its "
                            + "max_queued_messages above \($0 + Self.uncountedPackets) (docs/MQTT.md §5)"
                    }
                        ?? "accmon: host '\(name)': \(received) accessory topics read, and its bridge publishes no "
                        + "count to tell whether the broker dropped some: raise the broker's max_queued_messages above "
                        + "\(received + Self.uncountedPackets), or update the host's accmon-mqtt (docs/MQTT.md §5)")
            }
            watching.lastRecheck[level] = now
            // Counts tell a dropped accessory topic, not a dropped claim topic.
            if !complete { claimChecks.append(level) }
            var host = fresh.hosts[level] ?? (indexed.contains(level) ? FleetHost(level: level) : nil)
            if host?.status == nil, let status = censusStatus(level: level) {
                // The retained store gave no status; the host's bridge answered the census.
                if host == nil { host = FleetHost(level: level) }
                host!.status = status
                // A watcher holds it to its lease: no renewal, and the host goes stale (its bridge is on no node).
                if follows { host!.leaseEnds = status.leaseSeconds.map { now + UInt64($0) * 1_000_000_000 } }
            }
            if phase == .following {
                changes += state.takeRead(level: level, read: host)
            } else {
                state.setHost(level: level, to: host)
            }
            if window.holdsPayloads { handOver(level, of: window) }
        }
    }

    /// A dropped end marker in a window that received fewer packets than the broker's queue as known: the broker
    /// queues fewer; later windows are sized by what it delivered.
    private func learnSmallerQueue(_ packets: Int) {
        let smaller = max(packets, FleetReadOptions.minimumBrokerQueue)
        guard smaller < brokerQueue else { return }
        warnings.append(
            "accmon: mqtt: \(settings.address): the broker dropped messages after \(packets) in one read: it queues "
                + "fewer than --broker-queue \(brokerQueue) for a client; reading in smaller windows "
                + "(docs/MQTT.md §5)")
        brokerQueue = smaller
        plan.budget = budget
    }

    /// `--host NAME`: a host for which the broker serves no status, and whose bridge did not answer the census, is
    /// named, and the read is incomplete (docs/MQTT.md §5).
    func noteUnansweredNamedHost() {
        guard !follows, case .named(let name) = options.selection else { return }
        let level = FleetTopics.encodeLevel(name)
        guard state.hosts[level]?.status == nil else { return }
        incomplete = true
        warnings.append(
            "accmon: host '\(name)': the broker serves no status for it and its bridge did not answer the census: "
                + "unknown to this broker (or node), or its bridge is offline here (docs/MQTT.md §5)")
    }
}
