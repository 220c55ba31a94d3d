import AccmonMQTT
import Testing

@testable import AccmonBridge

/// The remote claims' leases and the replay guard: pure logic, with the time given.
struct LeaseBookTests {
    static func lease(_ claimID: String, _ user: String, at time: UInt64) -> LeaseBook.Lease {
        LeaseBook.Lease(claimID: claimID, user: user, token: nil, replyTopic: "r", correlation: nil, renewedAt: time)
    }

    @Test func aLeaseEndsItsDurationAfterTheLastRenewalByItsOwnUserOnly() {
        var book = LeaseBook(durationSeconds: 3)
        book.start(Self.lease("c-1", "ci", at: 0))
        book.start(Self.lease("c-2", "qa", at: 0))
        let unknown = book.renew(["c-1", "c-2", "c-9"], of: "ci", now: 2_000_000_000)
        #expect(unknown == ["c-2", "c-9"])
        var expired = book.takeExpired(now: 2_999_999_999)
        #expect(expired.isEmpty)
        expired = book.takeExpired(now: 3_000_000_000)
        #expect(expired.map(\.claimID) == ["c-2"])
        #expect(book.nextExpiry == 5_000_000_000)
        expired = book.takeExpired(now: 4_999_999_999)
        #expect(expired.isEmpty)
        expired = book.takeExpired(now: 5_000_000_000)
        #expect(expired.map(\.claimID) == ["c-1"] && book.isEmpty)
    }

    @Test func aRefreshGivesEveryLeaseAFreshFullExpiry() {
        var book = LeaseBook(durationSeconds: 30)
        book.start(Self.lease("c-1", "ci", at: 0))
        book.start(Self.lease("c-2", "qa", at: 20_000_000_000))
        // The broker was away from 10 s to 100 s: nobody could renew.
        book.refreshAll(now: 100_000_000_000)
        var expired = book.takeExpired(now: 129_000_000_000)
        #expect(expired.isEmpty)
        expired = book.takeExpired(now: 130_000_000_000)
        #expect(expired.count == 2)
        #expect(book.lease("c-1", of: "ci") == nil)
    }

    @Test func aNonceIsTakenOncePerUserWithinTheMemory() {
        var memory = NonceMemory(capacity: 3)
        var admitted = [memory.admit("n1", of: "ci"), memory.admit("n1", of: "ci"), memory.admit("n1", of: "qa")]
        // Another user's nonce is another request (on its own topic).
        #expect(admitted == [true, false, true])
        admitted = ["n2", "n3", "n4"].map { memory.admit($0, of: "ci") }
        #expect(admitted == [true, true, true])
        // Forgotten past the capacity (the message expiry bounds how late a replay can come).
        admitted = [memory.admit("n1", of: "ci"), memory.admit("n4", of: "ci")]
        #expect(admitted == [true, false])
    }

    @Test func theRequestTopicsLevelIsTheDecodedUser() {
        let topics = FleetTopics(prefix: "site/accmon")
        let topic = topics.claimRequest(host: "lab/1", user: "ci+bot")
        #expect(topic == "site/accmon/lab%2F1/claim-requests/ci%2Bbot")
        #expect(topics.claimRequester(topic, host: "lab/1") == "ci+bot")
        #expect(topics.claimRequester(topic + "/x", host: "lab/1") == nil)
        #expect(topics.claimRequester(topic, host: "lab-2") == nil)
        #expect(topics.claimReplies(host: "lab/1", user: "ci+bot") == "site/accmon/lab%2F1/claim-replies/ci%2Bbot/")
        let claim = topics.claim(host: "lab/1", accessoryID: "usb:1209:0001:sysfs=/x", connectionID: 7)
        #expect(claim == "site/accmon/lab%2F1/claims/usb:1209:0001:sysfs=%2Fx/7")
        #expect(topics.parseClaim(claim)?.accessoryID == "usb:1209:0001:sysfs=/x")
        #expect(topics.parseClaim(claim)?.host == "lab/1")
    }
}
