import AccmonDevices
import AccmonLogging
import AccmonManifest
import AccmonProtocol
import AccmonSys

/// Identifies a preservable session: a restore id is only ever handed back to the same user.
struct RestoreKey: Hashable, Codable {
    var uid: UInt32
    var restoreID: String
}

/// The bus peer a subscription belonged to: its unique name is that peer's only on the bus of that id (names are
/// reused after a dbus-daemon restart). A peer still on that bus gets its subscription back by itself when accmond
/// is back on the bus.
struct BusPeerIdentity: Codable, Sendable, Hashable {
    var peer: String
    var busID: String
    var objectPath: String
}

/// A session whose client went away, kept for its restore id: it keeps recording events.
struct PreservedSession {
    var clientName: String
    /// Who the client was: what it may see keeps deciding what is recorded.
    var principal: ClientPrincipal?
    var memory: SessionMemory
    /// The unit registered for relaunch in the client's `hello`: started when an event is recorded while it is away.
    var relaunch: LaunchTemplate? = nil
    /// For a bus subscription, its peer.
    var bus: BusPeerIdentity? = nil
    /// When the client went away: monotonic (for expiry in this run) and wall clock (saved across restarts).
    var since: UInt64
    var sinceWallClock: Double
}

/// The preserved sessions, their retention time and their bounds: per user and in all.
struct PreservedSessions {
    let retentionNanoseconds: UInt64
    /// The most sessions kept in all.
    let limit: Int
    /// The most sessions kept for one user.
    let limitPerUser: Int
    private(set) var sessions: [RestoreKey: PreservedSession] = [:]
    /// How many sessions each user has kept.
    private var countByUID: [UInt32: Int] = [:]

    init(retentionSeconds: Double, limit: Int, limitPerUser: Int) {
        retentionNanoseconds = UInt64(retentionSeconds * 1e9)
        self.limit = limit
        self.limitPerUser = limitPerUser
    }

    /// How many sessions user `uid` has kept.
    func count(of uid: UInt32) -> Int { countByUID[uid] ?? 0 }

    /// Keeps `session`. Over the user's bound, that user's oldest is dropped; over the bound in all, the oldest of
    /// the user who keeps the most: one user's restore ids never push out another's while that one keeps fewer.
    /// Returns the keys dropped.
    mutating func preserve(_ session: PreservedSession, as key: RestoreKey) -> [RestoreKey] {
        if sessions.updateValue(session, forKey: key) == nil { countByUID[key.uid, default: 0] += 1 }
        var dropped: [RestoreKey] = []
        while count(of: key.uid) > limitPerUser, let oldest = oldest(of: key.uid) {
            remove(oldest)
            dropped.append(oldest)
        }
        while sessions.count > limit, let heaviest = countByUID.max(by: { $0.value < $1.value })?.key,
            let oldest = oldest(of: heaviest)
        {
            remove(oldest)
            dropped.append(oldest)
        }
        return dropped
    }

    private func oldest(of uid: UInt32) -> RestoreKey? {
        sessions.filter { $0.key.uid == uid }.min { $0.value.since < $1.value.since }?.key
    }

    @discardableResult
    private mutating func remove(_ key: RestoreKey) -> PreservedSession? {
        guard let removed = sessions.removeValue(forKey: key) else { return nil }
        countByUID[key.uid]! -= 1
        if countByUID[key.uid] == 0 { countByUID[key.uid] = nil }
        return removed
    }

    /// Takes the session for `key` back, if kept.
    mutating func claim(_ key: RestoreKey) -> PreservedSession? {
        remove(key)
    }

    /// Records `event` (with its encoded line) in every preserved session whose filter passes it and whose client
    /// may see it. Returns the sessions that recorded it.
    @discardableResult
    mutating func record(_ event: AccessoryEvent, line: [UInt8], visible: (ClientPrincipal?) -> Bool) -> [RestoreKey] {
        var recorded: [RestoreKey] = []
        for (key, kept) in sessions where kept.memory.filter.matches(event.accessory) && visible(kept.principal) {
            sessions[key]!.memory.record(event, line: line)
            recorded.append(key)
        }
        return recorded
    }

    /// Records `event` in the given sessions.
    mutating func record(_ event: AccessoryEvent, line: [UInt8], for keys: [RestoreKey]) {
        for key in keys { sessions[key]?.memory.record(event, line: line) }
    }

    /// Drops sessions kept longer than the retention time; returns their keys.
    mutating func expire(now: UInt64) -> [RestoreKey] {
        let expired = sessions.filter { now &- $0.value.since >= retentionNanoseconds }.map(\.key)
        for key in expired { remove(key) }
        return expired
    }

    /// Nanoseconds until the next expiry, or `nil` when nothing is kept.
    func nanosecondsUntilNextExpiry(now: UInt64) -> UInt64? {
        sessions.values.map { $0.since &+ retentionNanoseconds }.min().map { $0 > now ? $0 - now : 0 }
    }
}
