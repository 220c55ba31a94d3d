import Testing

@testable import AccmondKit

/// The relaunch limiter: backoff until the app comes back, a cap per minute, a cap on apps awaited at once.
@Suite struct RelaunchLimiterTests {
    static let second: UInt64 = 1_000_000_000

    /// Wants a relaunch every `every` until `until` (an event every time: an app that crashes before its hello);
    /// returns when it was relaunched and what was reported.
    func crashingApp(every: UInt64, until: UInt64) -> (starts: [UInt64], limits: [RelaunchLimiter<String>.Limit]) {
        var limiter = RelaunchLimiter<String>()
        var starts: [UInt64] = []
        var limits: [RelaunchLimiter<String>.Limit] = []
        var now: UInt64 = 0
        while now <= until {
            limiter.want("app", now: now)
            var limited: [(String, RelaunchLimiter<String>.Limit)] = []
            starts += limiter.due(now: now, limited: &limited).map { _ in now }
            limits += limited.map(\.1)
            now += every
        }
        return (starts, limits)
    }

    @Test func aCrashingAppIsRelaunchedWithBackoffAndAtMostTheCapPerMinute() {
        let (starts, limits) = crashingApp(every: Self.second / 2, until: 119 * Self.second)
        // 2 s, then 4 s of backoff; the cap of 3 a minute then holds the fourth until a minute after the first.
        #expect(Array(starts.prefix(3)) == [0, 2, 6].map { $0 * Self.second })
        #expect(starts.count == 6, "3 in each of two minutes: \(starts.map { $0 / Self.second })")
        for start in starts {
            #expect(starts.filter { $0 >= start && $0 < start + 60 * Self.second }.count <= 3)
        }
        #expect(limits.contains(.backoff) && limits.contains(.perMinute))
    }

    @Test func anAppThatComesBackStartsItsBackoffOver() {
        var limiter = RelaunchLimiter<String>(settings: .init(perMinute: 10))
        var limited: [(String, RelaunchLimiter<String>.Limit)] = []
        limiter.want("app", now: 0)
        #expect(limiter.due(now: 0, limited: &limited) == ["app"])
        limiter.want("app", now: Self.second)
        #expect(limiter.due(now: Self.second, limited: &limited).isEmpty, "2 s of backoff: it did not come back")
        #expect(limiter.due(now: 2 * Self.second, limited: &limited) == ["app"])
        limiter.want("app", now: 3 * Self.second)
        #expect(limiter.due(now: 5 * Self.second, limited: &limited).isEmpty, "then 4 s")
        limiter.reclaimed("app")
        limiter.want("app", now: 5 * Self.second)
        #expect(limiter.due(now: 5 * Self.second, limited: &limited) == ["app"], "it came back: no wait")
        limiter.want("app", now: 6 * Self.second)
        #expect(limiter.due(now: 6 * Self.second, limited: &limited).isEmpty)
        #expect(limiter.due(now: 7 * Self.second, limited: &limited) == ["app"], "2 s again, not 8 s")
    }

    @Test func aWishWhileLimitedIsKeptUntilTheLimitPasses() {
        var limiter = RelaunchLimiter<String>()
        var limited: [(String, RelaunchLimiter<String>.Limit)] = []
        limiter.want("app", now: 0)
        _ = limiter.due(now: 0, limited: &limited)
        limiter.want("app", now: Self.second)
        #expect(limiter.due(now: Self.second, limited: &limited).isEmpty)
        #expect(limited.map(\.1) == [.backoff])
        #expect(limiter.nanosecondsUntilDue(now: Self.second) == Self.second)
        #expect(limiter.due(now: 2 * Self.second, limited: &limited) == ["app"])
        #expect(limiter.nanosecondsUntilDue(now: 2 * Self.second) == nil)
    }

    /// A daemon restart that records events for 20 preserved sessions starts 4 apps, then one more for each that
    /// comes back (or when one has been awaited for 30 s).
    @Test func atMostFourAppsAreAwaitedAtOnce() {
        var limiter = RelaunchLimiter<String>()
        var limited: [(String, RelaunchLimiter<String>.Limit)] = []
        let apps = (0..<20).map { "app\($0)" }
        for app in apps { limiter.want(app, now: 0) }
        let first = limiter.due(now: 0, limited: &limited)
        #expect(first == ["app0", "app1", "app2", "app3"], "oldest wish first")
        #expect(limited.count == 16 && limited.allSatisfy { $0.1 == .awaiting })
        #expect(limiter.due(now: Self.second, limited: &limited).isEmpty)
        limiter.reclaimed("app1")
        #expect(limiter.due(now: Self.second, limited: &limited) == ["app4"])
        #expect(limiter.nanosecondsUntilDue(now: Self.second) == 29 * Self.second)
        let later = limiter.due(now: 30 * Self.second, limited: &limited)
        #expect(later == ["app5", "app6", "app7"], "the first ones no longer count after 30 s")
    }

    @Test func aRelaunchThatFailedIsNotAwaited() {
        var limiter = RelaunchLimiter<String>(settings: .init(maximumAwaiting: 1))
        var limited: [(String, RelaunchLimiter<String>.Limit)] = []
        limiter.want("refused", now: 0)
        limiter.want("other", now: 0)
        #expect(limiter.due(now: 0, limited: &limited) == ["refused"])
        #expect(limiter.due(now: 0, limited: &limited).isEmpty, "one awaited at most")
        limiter.startFailed("refused")
        #expect(limiter.due(now: 0, limited: &limited) == ["other"], "the refused one no longer holds the slot")
    }
}
