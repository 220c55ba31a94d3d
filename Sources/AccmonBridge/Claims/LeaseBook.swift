/// The leases of remote claims on this host (docs/MQTT.md §12.4): each claim or place in line a remote user holds
/// lives while its claimer renews it. Pure: the caller gives the time and acts on what expires.
///
/// The clocks stop while the bridge is cut off from the broker (a claimer cannot renew then): ``refreshAll(now:)``
/// gives every lease a fresh full expiry when the broker is back, so that a broker outage takes nothing.
struct LeaseBook: Sendable {
    /// One remote claim: whose, where its notices go, and when it was last renewed (monotonic nanoseconds).
    struct Lease: Sendable, Hashable {
        var claimID: String
        var user: String
        /// The token accmond gave (to take the claim up again after accmond restarts); `nil` for a claim found in
        /// accmond after the bridge restarted.
        var token: String?
        var replyTopic: String
        var correlation: [UInt8]?
        var renewedAt: UInt64
    }

    /// How long a lease lasts after its last renewal, in nanoseconds.
    let duration: UInt64
    private(set) var leases: [String: Lease] = [:]

    init(durationSeconds: Double) { duration = UInt64(durationSeconds * 1e9) }

    var isEmpty: Bool { leases.isEmpty }

    mutating func start(_ lease: Lease) { leases[lease.claimID] = lease }

    /// The lease of `claimID` when `user` holds it.
    func lease(_ claimID: String, of user: String) -> Lease? {
        guard let lease = leases[claimID], lease.user == user else { return nil }
        return lease
    }

    /// Renews `claimIDs` of `user`; returns those it does not hold (ended, or another's: a claimer cannot keep
    /// another user's claim alive).
    mutating func renew(_ claimIDs: [String], of user: String, now: UInt64) -> [String] {
        var unknown: [String] = []
        for claimID in claimIDs {
            if leases[claimID]?.user == user { leases[claimID]?.renewedAt = now } else { unknown.append(claimID) }
        }
        return unknown
    }

    @discardableResult
    mutating func remove(_ claimID: String) -> Lease? { leases.removeValue(forKey: claimID) }

    /// Takes out and returns the leases not renewed for ``duration``, oldest first.
    mutating func takeExpired(now: UInt64) -> [Lease] {
        let expired = leases.values.filter { now >= $0.renewedAt && now - $0.renewedAt >= duration }
            .sorted { $0.renewedAt < $1.renewedAt }
        for lease in expired { leases.removeValue(forKey: lease.claimID) }
        return expired
    }

    /// When the next lease expires, if any.
    var nextExpiry: UInt64? { leases.values.map { $0.renewedAt &+ duration }.min() }

    /// A fresh full expiry for every lease (the broker is back, or the bridge found the claims after a restart).
    mutating func refreshAll(now: UInt64) {
        for key in leases.keys { leases[key]?.renewedAt = now }
    }
}

/// The nonces a host has seen, per user, to ignore a replayed request: the last `capacity` of each user.
struct NonceMemory: Sendable {
    let capacity: Int
    private var seen: [String: (set: Set<String>, order: [String])] = [:]

    init(capacity: Int = 4096) { self.capacity = capacity }

    /// Records `nonce` of `user`; false when it was seen already.
    mutating func admit(_ nonce: String, of user: String) -> Bool {
        var entry = seen[user] ?? ([], [])
        guard entry.set.insert(nonce).inserted else { return false }
        entry.order.append(nonce)
        if entry.order.count > capacity {
            entry.set.remove(entry.order.removeFirst())
        }
        seen[user] = entry
        return true
    }
}
