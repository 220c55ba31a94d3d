import AccmonSys
import Testing

/// The epoll pieces the broker loop relies on to drive the udev source from its own thread: a poller watched by
/// another poller, and the one-shot timer that paces a failed monitor's reopening.
@Suite("Poller, nested pollers and the one-shot timer")
struct PollerTests {
    @Test func aPollerIsReadableInAnotherWhileItsDescriptorsAreReady() throws {
        var outer = try Poller(capacity: 4)
        var inner = try Poller(capacity: 4)
        let wakeup = try WakeupEvent()
        defer { wakeup.descriptor.close() }
        try inner.add(wakeup.descriptor, interest: .readable, token: 7)
        try outer.add(inner.descriptor, interest: .readable, token: 3)
        #expect(try outer.wait(timeoutMilliseconds: 0).isEmpty)
        wakeup.signal()
        // Level-triggered: ready in the outer poller for as long as the inner one has something ready.
        #expect(try outer.wait(timeoutMilliseconds: 1000).map(\.token) == [3])
        #expect(try outer.wait(timeoutMilliseconds: 0).map(\.token) == [3])
        #expect(try inner.wait(timeoutMilliseconds: 0).map(\.token) == [7])
        wakeup.drain()
        #expect(try outer.wait(timeoutMilliseconds: 0).isEmpty)
    }

    @Test func theTimerExpiresOnceAfterItsDelay() throws {
        var poller = try Poller(capacity: 1)
        let timer = try OneShotTimer()
        try poller.add(timer.descriptor, interest: .readable, token: 1)
        let expiredBeforeArming = timer.takeExpiry()
        #expect(!expiredBeforeArming, "a timer never armed has not expired")
        let start = monotonicNanoseconds()
        timer.arm(milliseconds: 50)
        #expect(try poller.wait(timeoutMilliseconds: 5000).map(\.token) == [1])
        #expect(monotonicNanoseconds() - start >= 50_000_000)
        let first = timer.takeExpiry()
        let second = timer.takeExpiry()
        #expect(first)
        #expect(!second, "one expiry, taken once")
        #expect(try poller.wait(timeoutMilliseconds: 100).isEmpty, "one-shot: it does not fire again")
    }
}
