/// How fast each user may connect: a token bucket per uid, kept as the generic cell rate algorithm keeps one (a
/// theoretical arrival time per uid), so that a user who connects within its rate holds no entry at all.
///
/// A connection costs the loop whether it is served or refused (`accept`, the peer's credentials, a session or a
/// refusal, `close`), and a flood of them costs in proportion to their number. Past its rate a user's next
/// connections wait in the listening socket's backlog: the loop stops watching the listener until the user is back
/// within its rate, so that the flood costs its sender waiting time instead of costing everyone the loop.
struct ConnectionRate {
    /// Connections per second allowed to one user, after ``burst``; 0: no limit.
    let perSecond: Int
    /// Connections one user may make at once before the rate applies.
    let burst: Int
    private var arrivals: [UInt32: UInt64] = [:]

    init(perSecond: Int, burst: Int) {
        self.perSecond = perSecond
        self.burst = max(1, burst)
    }

    private var interval: UInt64 { perSecond > 0 ? 1_000_000_000 / UInt64(perSecond) : 0 }

    /// Counts a connection of `uid` at `now` (monotonic nanoseconds). Returns how long to wait before accepting
    /// another connection of that user, when it is now over its rate, or `nil` while it is within it.
    mutating func connected(_ uid: UInt32, now: UInt64) -> UInt64? {
        guard perSecond > 0 else { return nil }
        if arrivals.count > 4096 { arrivals = arrivals.filter { $0.value > now } }
        let arrival = max(arrivals[uid] ?? now, now) + interval
        arrivals[uid] = arrival
        let allowance = UInt64(burst) * interval
        let ahead = arrival - now
        return ahead > allowance ? ahead - allowance : nil
    }

    /// The uids that hold an entry (are not yet back to their full burst).
    var trackedUsers: Int { arrivals.count }
}
