import AccmonTestSupport
import Testing

@testable import AccmonMQTT

/// The census's request, its window and a read's rounds (docs/MQTT.md §5).
@Suite struct CensusTests {
    private static let second: UInt64 = 1_000_000_000

    private func answer(_ host: String) -> Census.Answer {
        Census.Answer(
            host: host, accessories: 0, digest: String(repeating: "0", count: 16),
            status: HostStatus(state: .online, host: host, machineID: "m", runID: "r", since: 1, bridge: "0.1.0"))
    }

    @Test func aRequestSaysItsWindowAndHostAndAnythingElseIsAnsweredAtOnceByEveryBridge() {
        let request = Census.Request(window: 0.25, host: "lab 1")
        #expect(String(decoding: request.payload, as: UTF8.self) == #"{"host":"lab 1","window":0.25}"#)
        #expect(Census.Request.decode(request.payload) == request)
        #expect(request.isAnswered(by: "lab 1") && !request.isAnswered(by: "lab-1"))
        for old in ["{}", "", "not json", #"{"window":"soon"}"#, "[1]"] {
            let decoded = Census.Request.decode(Array(old.utf8))
            #expect(decoded == Census.Request(), "\(old)")
            var random = SystemRandomNumberGenerator()
            let delay = decoded.answerDelay(using: &random)
            #expect(delay == 0 && decoded.isAnswered(by: "any"))
        }
    }

    /// The answer's moment is uniform within the window (at most ``Census/longestWindow``); none for a window that
    /// is not a positive number.
    @Test(arguments: [0.2, 3.0, 600.0]) func anAnswerComesAtARandomMomentWithinTheWindow(window: Double) {
        var random = SplitMix64(seed: SplitMix64.testSeed())
        let span = min(window, Census.longestWindow) * 1e9
        let delays = (0..<4000).map { _ in Double(Census.Request(window: window).answerDelay(using: &random)) }
        #expect(delays.allSatisfy { $0 >= 0 && $0 < span })
        // Each tenth of the window gets about a tenth of the answers (400 each; 5 standard deviations is ±95).
        var tenths = [Int](repeating: 0, count: 10)
        for delay in delays { tenths[Int(delay / span * 10)] += 1 }
        #expect(tenths.allSatisfy { (305...495).contains($0) }, "\(tenths)")
        for odd in [0, -1, .nan, .infinity] {
            let delay = Census.Request(window: odd).answerDelay(using: &random)
            #expect(delay == 0)
        }
    }

    @Test func aWindowSpreadsWhatTheQueueDoesNotHoldAtTheRateAReaderTakes() {
        #expect(CensusWindow.seconds(hosts: 10, room: 900) == CensusWindow.shortest)
        #expect(CensusWindow.seconds(hosts: 10_900, room: 900) == 2.0)
        #expect(CensusWindow.seconds(hosts: 1_000_000, room: 900) == Census.longestWindow)
        #expect(CensusWindow.carries(seconds: 2.0, room: 900) == 10_900)
        // A window sized for n hosts carries them.
        for hosts in [0, 1, 500, 5_000, 20_000, 50_000] {
            let seconds = CensusWindow.seconds(hosts: hosts, room: 900)
            #expect(CensusWindow.carries(seconds: seconds, room: 900) >= hosts)
        }
    }

    /// A round ends once quiet after its window and its last answer, or at its longest wait while a host it awaits
    /// has not answered; only its own answers count, and a host heard in an earlier round is not awaited again.
    @Test func aRoundWaitsItsWindowThenTheQuietAndTakesOnlyItsOwnAnswers() {
        let quiet = CensusRead.quiet
        let start: UInt64 = 100 * Self.second
        let windowEnd = start + Self.second / 2
        var census = CensusRead(answerTopic: "t", session: "s", room: 10, automatic: true)
        let first = census.beginRound(windowSeconds: 0.5, at: start)
        let tookOwn = census.take(answer("a"), correlation: first, at: start + Self.second / 10)
        let tookOther = census.take(answer("b"), correlation: Array("other".utf8), at: start)
        #expect(tookOwn && !tookOther)
        #expect(census.answers.keys.sorted() == ["a"])
        // A lull longer than the quiet time inside the window does not end it; the quiet time after its end does.
        #expect(!census.roundOver(now: windowEnd))
        #expect(census.roundOver(now: windowEnd + quiet))
        #expect(census.nextCheck(after: start) == windowEnd + quiet)
        // An answer just before that: the quiet time after it.
        _ = census.take(answer("c"), correlation: first, at: windowEnd + quiet - 1)
        #expect(!census.roundOver(now: windowEnd + quiet))
        #expect(census.roundOver(now: windowEnd + 2 * quiet))

        // A host known online that does not answer: until the longest wait (the window again, 1 s at least).
        var waiting = CensusRead(answerTopic: "t", session: "s", room: 10, automatic: true)
        let round = waiting.beginRound(windowSeconds: 0.5, awaiting: ["late", "a"], at: start)
        _ = waiting.take(answer("a"), correlation: round, at: start)
        #expect(waiting.unanswered == ["late"])
        #expect(!waiting.roundOver(now: start + Self.second))
        #expect(waiting.nextCheck(after: start + Self.second) == windowEnd + Self.second)
        #expect(waiting.roundOver(now: windowEnd + Self.second))
        let another = waiting.endRound(now: windowEnd + Self.second)
        #expect(another == nil)
        #expect(waiting.settled && waiting.shortfall == nil)
        // In a next round, "a" (heard already) is not awaited; "late" is until it answers.
        let next = waiting.beginRound(windowSeconds: 0.5, awaiting: ["late", "a"], at: start)
        #expect(waiting.unanswered == ["late"])
        _ = waiting.take(answer("late"), correlation: next, at: start)
        #expect(waiting.unanswered.isEmpty && waiting.roundOver(now: windowEnd + quiet))
    }

    /// More answers than the window carries: another round, twice as large, then a shortfall past the last round;
    /// answers still coming at the longest wait: a shortfall; a window given by the user: no other round.
    @Test func roundsGrowWhileMoreAnswerThanTheWindowCarries() {
        var census = CensusRead(answerTopic: "t", session: "s", room: 10, automatic: true)
        var now: UInt64 = 100 * Self.second
        var windows: [Double] = []
        var seconds = CensusWindow.shortest
        while true {
            let correlation = census.beginRound(windowSeconds: seconds, at: now)
            #expect(census.carries == CensusWindow.carries(seconds: seconds, room: 10))
            for host in 0..<60_000 { _ = census.take(answer("h\(host)"), correlation: correlation, at: now) }
            now += 20 * Self.second
            windows.append(seconds)
            guard let next = census.endRound(now: now) else { break }
            seconds = next
        }
        // 60,000 answers: the second round is as long as any (10 s), and carries 50,010; the third too.
        #expect(windows == [CensusWindow.shortest, Census.longestWindow, Census.longestWindow], "\(windows)")
        #expect(census.round == CensusWindow.rounds)
        #expect(census.shortfall == .moreThanCarried(answers: 60_000, seconds: Census.longestWindow))
        var fewer = CensusRead(answerTopic: "t", session: "s", room: 10, automatic: true)
        let firstRound = fewer.beginRound(windowSeconds: 0.1, at: now)
        for host in 0..<20_000 { _ = fewer.take(answer("h\(host)"), correlation: firstRound, at: now) }
        let second = fewer.endRound(now: now + Self.second)
        #expect(second == CensusWindow.seconds(hosts: 40_000, room: 10))
        let secondRound = fewer.beginRound(windowSeconds: second ?? 0, at: now + Self.second)
        for host in 0..<20_000 { _ = fewer.take(answer("h\(host)"), correlation: secondRound, at: now) }
        let third = fewer.endRound(now: now + 10 * Self.second)
        #expect(third == nil && fewer.shortfall == nil && fewer.answers.count == 20_000)

        var given = CensusRead(answerTopic: "t", session: "s", room: 10, automatic: false)
        let correlation = given.beginRound(windowSeconds: 0.1, at: now)
        for host in 0..<600 { _ = given.take(answer("h\(host)"), correlation: correlation, at: now) }
        let givenAnother = given.endRound(now: now + Self.second)
        #expect(givenAnother == nil)
        #expect(given.shortfall == .moreThanCarried(answers: 600, seconds: 0.1))

        var trickling = CensusRead(answerTopic: "t", session: "s", room: 10, automatic: true)
        let trickle = trickling.beginRound(windowSeconds: 0.2, at: now)
        let longest = trickling.longestWait
        #expect(longest == now + Self.second / 5 + Self.second)
        _ = trickling.take(answer("x"), correlation: trickle, at: longest - 1)
        #expect(trickling.roundOver(now: longest))
        let trickleAnother = trickling.endRound(now: longest)
        #expect(trickleAnother == nil)
        #expect(trickling.shortfall == .stillAnswering(seconds: 1.2))
    }
}
