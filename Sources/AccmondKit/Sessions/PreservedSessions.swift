import AccmonDevices
import AccmonLogging
import AccmonManifest
import AccmonProtocol
import AccmonSys

/// Identifies a preservable session: a restore id is only ever handed back to the same user.
struct RestoreKey: Hashable {
    var uid: UInt32
    var restoreID: String
}

/// A session whose client went away, kept for its restore id: it keeps recording events.
struct PreservedSession {
    var clientName: String
    /// Who the client was: what it may see keeps deciding what is recorded.
    var principal: ClientPrincipal?
    var memory: SessionMemory
    /// When the client went away: monotonic (for expiry in this run) and wall clock (saved across restarts).
    var since: UInt64
    var sinceWallClock: Double
}

/// The preserved sessions, their retention time and their number bound.
struct PreservedSessions {
    let retentionNanoseconds: UInt64
    let maximumCount: Int
    private(set) var sessions: [RestoreKey: PreservedSession] = [:]

    init(retentionSeconds: Double, maximumCount: Int) {
        retentionNanoseconds = UInt64(retentionSeconds * 1e9)
        self.maximumCount = maximumCount
    }

    /// Keeps `session`; when over the bound, drops the oldest and returns its key.
    mutating func preserve(_ session: PreservedSession, as key: RestoreKey) -> [RestoreKey] {
        sessions[key] = session
        var dropped: [RestoreKey] = []
        while sessions.count > maximumCount,
            let oldest = sessions.min(by: { $0.value.since < $1.value.since })?.key
        {
            sessions[oldest] = nil
            dropped.append(oldest)
        }
        return dropped
    }

    /// Takes the session for `key` back, if kept.
    mutating func claim(_ key: RestoreKey) -> PreservedSession? {
        sessions.removeValue(forKey: key)
    }

    /// Records `event` (with its encoded line) in every preserved session whose filter passes it and whose client
    /// may see it.
    mutating func record(_ event: AccessoryEvent, line: [UInt8], visible: (ClientPrincipal?) -> Bool) {
        for (key, kept) in sessions where kept.memory.filter.matches(event.accessory) && visible(kept.principal) {
            sessions[key]!.memory.record(event, line: line)
        }
    }

    /// Records `event` in the given sessions.
    mutating func record(_ event: AccessoryEvent, line: [UInt8], for keys: [RestoreKey]) {
        for key in keys { sessions[key]?.memory.record(event, line: line) }
    }

    /// Drops sessions kept longer than the retention time; returns their keys.
    mutating func expire(now: UInt64) -> [RestoreKey] {
        let expired = sessions.filter { now &- $0.value.since >= retentionNanoseconds }.map(\.key)
        for key in expired { sessions[key] = nil }
        return expired
    }

    /// Nanoseconds until the next expiry, or `nil` when nothing is kept.
    func nanosecondsUntilNextExpiry(now: UInt64) -> UInt64? {
        sessions.values.map { $0.since &+ retentionNanoseconds }.min().map { $0 > now ? $0 - now : 0 }
    }
}
