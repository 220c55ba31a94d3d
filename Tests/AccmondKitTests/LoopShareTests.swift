import Testing

@testable import AccmondKit

/// Each user's share of the loop: a burst ahead of the share's rate, then work at that rate; users apart.
@Suite struct LoopShareTests {
    static let millisecond: UInt64 = 1_000_000

    /// A user that works whenever it may, `work` at a time, from 0 until `until`: the loop's time it took.
    func greedy(_ share: inout LoopShare, uid: UInt32, work: UInt64, until: UInt64) -> UInt64 {
        var now: UInt64 = 0
        var used: UInt64 = 0
        while now < until {
            if let held = share.heldUntil(uid, now: now) {
                now = held
                continue
            }
            share.charge(uid, nanoseconds: work, now: now + work)
            used += work
            now += work
        }
        return used
    }

    @Test func aGreedyUserTakesItsShareAndTheBurst() {
        var share = LoopShare(share: 0.25, burstNanoseconds: 100 * Self.millisecond)
        let used = greedy(&share, uid: 65534, work: Self.millisecond / 10, until: 10_000 * Self.millisecond)
        // 10 s at a quarter, plus what the burst lets it run ahead (a third of it at full speed).
        let expected = 2_500 * Self.millisecond + 100 * Self.millisecond / 4
        #expect(used >= expected - 2 * Self.millisecond && used <= expected + 2 * Self.millisecond, "\(used)")
    }

    @Test func aUserWithinItsShareIsNeverHeld() {
        var share = LoopShare(share: 0.25)
        for step in 0..<10_000 {
            let now = UInt64(step) * Self.millisecond
            #expect(share.heldUntil(1000, now: now) == nil)
            share.charge(1000, nanoseconds: Self.millisecond / 5, now: now)
        }
    }

    @Test func usersAreChargedApart() {
        var share = LoopShare(share: 0.5, burstNanoseconds: 10 * Self.millisecond)
        share.charge(1, nanoseconds: 20 * Self.millisecond, now: 0)
        #expect(share.heldUntil(1, now: 0) == 30 * Self.millisecond)
        #expect(share.heldUntil(2, now: 0) == nil)
        #expect(share.heldUntil(1, now: 30 * Self.millisecond) == nil)
    }

    @Test func noLimitKeepsNothing() {
        for fraction in [0.0, 1.0] {
            var share = LoopShare(share: fraction)
            share.charge(1, nanoseconds: 10_000 * Self.millisecond, now: 0)
            #expect(share.heldUntil(1, now: 0) == nil && share.trackedUsers == 0)
        }
    }

    @Test func theTableOfUsersStaysBounded() {
        var share = LoopShare(share: 0.25)
        var now: UInt64 = 0
        for uid in 1...100_000 {
            now += Self.millisecond
            share.charge(UInt32(uid), nanoseconds: Self.millisecond / 10, now: now)
        }
        #expect(share.trackedUsers <= 4097)
    }
}
