/// Whether the bus takes what accmond writes to it; pure. The bus thread looks at sd-bus's queue of messages written
/// and not yet taken by the bus before each round of sending and after it: the bus made progress when that queue is
/// empty or shorter than the round left it, or when nothing waits to be sent. A bus that takes nothing for the stall
/// time while messages wait does not read (dbus-daemon stopped, or wedged); one that reads slowly is never stalled.
struct StallWatch {
    /// When the bus last made progress; nil until the first look.
    private(set) var progressAt: UInt64?
    /// sd-bus's queue as the last round of sending left it.
    private var queuedAfterSending: UInt64 = 0

    /// Before a round of sending: `queued` messages in sd-bus's queue, `waiting` whether more wait to be written.
    mutating func observe(queued: UInt64, waiting: Bool, now: UInt64) {
        if progressAt == nil || !waiting || queued == 0 || queued < queuedAfterSending { progressAt = now }
    }

    /// After a round of sending: what it left in sd-bus's queue.
    mutating func sent(queued: UInt64) {
        queuedAfterSending = queued
    }

    /// Whether the bus has made no progress for `stall` nanoseconds.
    func isStalled(after stall: UInt64, now: UInt64) -> Bool {
        guard let progressAt else { return false }
        return now >= progressAt && now - progressAt >= stall
    }

    /// Milliseconds until ``isStalled(after:now:)`` turns true without progress (at least 1), for poll's timeout.
    func millisecondsUntilStalled(after stall: UInt64, now: UInt64) -> Int32 {
        guard let progressAt else { return Int32(min(stall / 1_000_000 + 1, UInt64(Int32.max))) }
        let due = progressAt + stall
        return due > now ? Int32(min((due - now) / 1_000_000 + 1, UInt64(Int32.max))) : 1
    }
}
