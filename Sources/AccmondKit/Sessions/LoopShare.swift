/// Each user's share of the broker loop's time for its requests: a user (root excepted) whose requests took more than
/// its share (after a burst) has its requests wait until it is back within it. Kept as a theoretical time per uid,
/// when the work charged so far would be paid off at the share's rate, so a user within its share holds no entry.
///
/// The loop is one thread on a machine shared with the clients: a user flooding requests that it reads (within every
/// per-turn quota) would otherwise take all of it, and the CPU the loop takes is taken from every other process,
/// the healthy clients included. Waiting costs the flooder time, not the others.
struct LoopShare {
    /// The fraction of the loop's time one user's requests may take, from 0 (exclusive) to 1; 0: no limit.
    let share: Double
    /// How far ahead of the share's rate a user may run before its requests wait.
    let burstNanoseconds: UInt64
    private var due: [UInt32: UInt64] = [:]

    init(share: Double, burstNanoseconds: UInt64 = 100_000_000) {
        self.share = share
        self.burstNanoseconds = burstNanoseconds
    }

    var isLimited: Bool { share > 0 && share < 1 }

    /// Charges `nanoseconds` of the loop's time, spent on requests of `uid`, at `now`.
    mutating func charge(_ uid: UInt32, nanoseconds: UInt64, now: UInt64) {
        guard isLimited else { return }
        if due.count > 4096 { due = due.filter { $0.value > now } }
        due[uid] = max(due[uid] ?? now, now) + UInt64(Double(nanoseconds) / share)
    }

    /// Until when the requests of `uid` wait (monotonic nanoseconds), or `nil` when they may be handled now.
    func heldUntil(_ uid: UInt32, now: UInt64) -> UInt64? {
        guard isLimited, let due = due[uid], due > now + burstNanoseconds else { return nil }
        return due - burstNanoseconds
    }

    /// The uids that hold an entry (ran ahead of their share's rate lately).
    var trackedUsers: Int { due.count }
}
