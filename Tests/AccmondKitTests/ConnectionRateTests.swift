import AccmonTestSupport
import Testing

@testable import AccmondKit

/// Each user's connection rate: a burst at once, then the rate; a wait that ends when the user is back within it.
@Suite struct ConnectionRateTests {
    static let millisecond: UInt64 = 1_000_000

    /// Connects `uid` whenever allowed (waiting what `connected` says) from 0 until `until`; the times it connected.
    func greedy(_ rate: inout ConnectionRate, uid: UInt32, until: UInt64) -> [UInt64] {
        var now: UInt64 = 0
        var times: [UInt64] = []
        while now < until {
            times.append(now)
            if let wait = rate.connected(uid, now: now) { now += wait }
        }
        return times
    }

    @Test func aBurstIsAllowedAtOnceThenTheRate() {
        var rate = ConnectionRate(perSecond: 1000, burst: 64)
        var waits: [UInt64?] = []
        for _ in 0..<66 { waits.append(rate.connected(1000, now: 0)) }
        #expect(waits.prefix(64).allSatisfy { $0 == nil })
        #expect(waits[64] == Self.millisecond)
        #expect(waits[65] == 2 * Self.millisecond)
        // Once those waits are over, one more is within the rate, and the next waits again.
        #expect(rate.connected(1000, now: 3 * Self.millisecond) == nil)
        #expect(rate.connected(1000, now: 3 * Self.millisecond) == Self.millisecond)
    }

    @Test func aUserConnectingAsFastAsItMayGetsTheBurstPlusTheRate() {
        var rate = ConnectionRate(perSecond: 1000, burst: 64)
        let times = greedy(&rate, uid: 65534, until: 2_000 * Self.millisecond)
        // 2 s at 1000 a second, plus the burst (the last of which waits).
        #expect(times.count >= 2_000 + 63 && times.count <= 2_000 + 65, "\(times.count)")
    }

    @Test func usersAreCountedApart() {
        var rate = ConnectionRate(perSecond: 10, burst: 2)
        #expect(rate.connected(1, now: 0) == nil)
        #expect(rate.connected(1, now: 0) == nil)
        #expect(rate.connected(1, now: 0) != nil)
        #expect(rate.connected(2, now: 0) == nil)
        #expect(rate.connected(2, now: 0) == nil)
    }

    @Test func aUserWithinItsRateIsNeverHeld() {
        var rate = ConnectionRate(perSecond: 100, burst: 1)
        for step in 0..<1000 { #expect(rate.connected(7, now: UInt64(step) * 10 * Self.millisecond) == nil) }
    }

    @Test func zeroMeansNoLimitAndNoMemory() {
        var rate = ConnectionRate(perSecond: 0, burst: 1)
        for uid in 0..<10_000 { #expect(rate.connected(UInt32(uid), now: 0) == nil) }
        #expect(rate.trackedUsers == 0)
    }

    /// Many users that each connected once keep at most a bounded table: entries back to a full burst are dropped.
    @Test func theTableOfUsersStaysBounded() {
        var rate = ConnectionRate(perSecond: 1000, burst: 64)
        var generator = SplitMix64(seed: 30)
        var now: UInt64 = 0
        for _ in 0..<100_000 {
            now += UInt64.random(in: 0...100_000, using: &generator)
            _ = rate.connected(UInt32.random(in: 1...UInt32.max, using: &generator), now: now)
        }
        #expect(rate.trackedUsers <= 4097)
    }
}
