/// The claims of the fleet view: a host's claim topics are read in its window with its status and accessory topics
/// (FleetSession+Reads.swift), but its status counts only its accessory topics. So when the broker may have dropped a
/// message in a window (not every packet under its queue, or the first end marker lost), the claim topics of its
/// hosts are read again in windows of their own, which hold only claim topics; such a window that cannot be read
/// whole is read again in halves, down to one host, whose claims are then shown as read, with a warning.
extension FleetSession {
    /// The claim topics a claim check expects of a host: those read so far (at least 1), to size its windows. A window
    /// is whole as any other (fewer packets than the broker queues, its first end marker back); one that is not, which
    /// more claims than expected can make, is read again in halves.
    func claimCheckSize(_ level: String) -> Int { max(1, state.hosts[level]?.claims.count ?? 0) }

    /// Starts a window reading the claim topics of the next hosts to check; returns whether it started one.
    func startClaimCheck() throws(MQTTError) -> Bool {
        guard !claimChecks.isEmpty else { return false }
        var levels: [String] = []
        var total = 0
        for level in claimChecks {
            let size = claimCheckSize(level)
            guard levels.isEmpty || (total + size <= budget && levels.count < claimCheckCap) else { break }
            levels.append(level)
            total += size
        }
        claimChecks.removeFirst(levels.count)
        // Kept as a host's window keeps its subscriptions: subscribed again, a retained topic comes again.
        let keep: Bool
        if case .all = options.selection { keep = false } else { keep = follows }
        try startWindow(.claimCheck(levels), filters: levels.map { topics.claims(hostLevel: $0) }, keep: keep)
        return true
    }

    /// The end of a claim check: the claims read replace those shown, or the hosts are read again in smaller windows.
    func finishClaimCheck(_ levels: [String], fresh: FleetState, complete: Bool) {
        if !complete, levels.count > 1 {
            claimCheckCap = max(1, levels.count / 2)
            claimChecks.insert(contentsOf: levels, at: 0)
            return
        }
        if !complete {
            let read = fresh.hosts[levels[0]]?.claims.count ?? 0
            incomplete = true
            warnings.append(
                "accmon: host '\(FleetTopics.decodeLevel(levels[0]))': \(read) claim topics read, more than the broker "
                    + "delivers whole (it queues at most \(brokerQueue) messages for a client): some claims may not be "
                    + "shown; raise its max_queued_messages above \(read + Self.uncountedPackets + 2) (docs/MQTT.md §5)"
            )
        }
        if claimChecks.isEmpty { claimCheckCap = Int.max }
        for level in levels {
            let shown = state.replaceClaims(level: level, with: fresh.hosts[level]?.claims ?? [:])
            decoding?.changedAfterHandOver(level)
            if phase == .following { changes += shown }
        }
    }
}
